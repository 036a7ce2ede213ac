"""Gold: effects that must count each event exactly once."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from exactly_once.config import TopicSettings
from exactly_once.transforms.silver import event_schema


def player_xp_totals(rewards: DataFrame) -> DataFrame:
    """Total XP per player, each event_id counted once however often it was delivered.

    Silver's watermark dedup catches redeliveries that arrive close together; this batch-level
    dedup also catches those that arrive after silver's state for the event has expired.
    """
    return (
        rewards.dropDuplicates(["event_id"])
        .groupBy("player_id")
        .agg(
            F.sum("xp").cast("bigint").alias("total_xp"),
            F.count("*").alias("xp_events"),
            F.max("occurred_at").alias("last_granted_at"),
        )
    )


def arrived_too_late(max_age: str) -> Column:
    """Whether the broker received the event more than `max_age` after it happened.

    Measured by the record's Kafka timestamp, a fact of the log, never by when the pipeline
    runs: a rebuild months later, a full refresh or a restart after an outage decide the same.
    """
    if not max_age:
        return F.lit(False)
    return F.col("occurred_at") < F.col("kafka_timestamp") - F.expr(f"INTERVAL {max_age}")


def within_max_age(events: DataFrame, max_age: str) -> DataFrame:
    """Deliveries that arrived in time to apply; all of them when there is no limit."""
    return events.where(~arrived_too_late(max_age))


# `late_events` orders an event's deliveries by these: any delivery in time beats every late one
# (a delete: the ledger applied the event), then the latest late delivery is the one shown.
LATE_EVENT_SEQUENCE = ["applied", "kafka_timestamp", "kafka_partition", "kafka_offset"]


def late_event_changes(events: DataFrame, topic: TopicSettings) -> DataFrame:
    """Each valid delivery as a change of `late_events` (keyed by event_id): too late, an upsert
    with the reason; in time, a delete (`applied`), because then the ledger has the event.

    So an event is in `late_events` exactly when it has a late delivery and none in time,
    whatever the order its deliveries come in, in one micro-batch or across many.
    """
    fields = [f.name for f in event_schema(topic)]
    return events.select(
        F.lit(topic.name).alias("source_topic"),
        "event_id",
        "occurred_at",
        "kafka_timestamp",
        F.to_json(F.struct(*fields), {"ignoreNullFields": "false"}).alias("event"),
        F.lit(f"the broker received it more than {topic.max_event_age} after it occurred "
              "(max_event_age)").alias("reason"),
        (~arrived_too_late(topic.max_event_age)).alias("applied"),
        "kafka_partition",
        "kafka_offset",
    )
