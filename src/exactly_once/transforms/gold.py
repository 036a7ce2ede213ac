"""Gold: effects that must count each event exactly once."""

from __future__ import annotations

from pyspark.sql import DataFrame
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
