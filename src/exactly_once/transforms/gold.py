"""Gold: effects that must count each event exactly once."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


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


def _older_than(max_age: str) -> Column:
    """Whether an event arrived more than `max_age` after it happened (by bronze ingestion)."""
    return F.col("occurred_at") < F.col("ingested_at") - F.expr(f"INTERVAL {max_age}")


def within_max_age(events: DataFrame, max_age: str) -> DataFrame:
    """Events recent enough to apply; all of them when there is no limit."""
    return events.where(~_older_than(max_age)) if max_age else events


def late_events(events: DataFrame, max_age: str, applied: DataFrame, source_topic: str) \
        -> DataFrame:
    """Events too old to apply that were never applied: kept for a person, with the reason.

    A redelivery of an event that was applied in time is a duplicate, not a late event: the
    anti-join with the applied events (the processed-messages ledger) leaves it out.
    """
    if not max_age:
        return events.where(F.lit(False)).select(*_late_columns(source_topic, max_age))
    too_old = events.where(_older_than(max_age))
    return too_old.join(applied.select("event_id"), "event_id", "left_anti") \
        .select(*_late_columns(source_topic, max_age))


def _late_columns(source_topic: str, max_age: str) -> list:
    return [
        F.lit(source_topic).alias("source_topic"),
        "event_id",
        "occurred_at",
        "ingested_at",
        F.to_json(F.struct("*")).alias("event"),
        F.lit(f"arrived more than {max_age} after it occurred (max_event_age)").alias("reason"),
    ]
