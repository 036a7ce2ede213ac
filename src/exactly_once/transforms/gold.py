"""Gold: effects that must count each event exactly once."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from exactly_once.settings.pipeline import TopicSettings
from exactly_once.transforms.silver import ARRIVED_LATE, event_schema


def in_time_grants(rewards: DataFrame) -> DataFrame:
    """Silver's grants that arrived in time to apply; all of them when there is no limit."""
    if ARRIVED_LATE not in rewards.columns:
        return rewards
    return rewards.where(~F.col(ARRIVED_LATE))


# `late_events` orders an event's deliveries by this: a delivery in time (a delete: the ledger
# applied the event) beats every late one. Late copies are then equal, and AUTO CDC's tie-break
# (the content) decides, so which of them silver kept changes nothing.
LATE_EVENT_SEQUENCE = ["applied"]


def late_event_changes(rewards: DataFrame, topic: TopicSettings) -> DataFrame:
    """Each grant in silver as a change of `late_events` (keyed by event_id): late, an upsert
    with the reason; in time, a delete (`applied`), because then the ledger has the event.

    So an event is in `late_events` exactly when it has a late delivery and none in time,
    whatever the order its deliveries come in, in one micro-batch or across many. Only the
    event's own fields are kept, not which delivery carried it.
    """
    fields = [f.name for f in event_schema(topic)]
    return rewards.select(
        F.lit(topic.dataset_suffix).alias("source_topic"),
        "event_id",
        "occurred_at",
        F.to_json(F.struct(*fields), {"ignoreNullFields": "false"}).alias("event"),
        F.lit(f"the broker received it more than {topic.max_event_age} after it occurred "
              "(max_event_age)").alias("reason"),
        (~F.col(ARRIVED_LATE)).alias("applied"),
    )
