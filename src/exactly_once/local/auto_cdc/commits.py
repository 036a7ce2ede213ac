"""The writes of an AUTO CDC batch that a replayed batch must not repeat.

Structured Streaming replays a micro-batch after a crash. Each write here carries Delta's
idempotent-write marker (txnAppId = the streaming query's id + flow + table, txnVersion = batch
id), as Spark's own Delta sink does with its query id: a write that already committed is skipped
on replay. A new checkpoint is a new query id, so its batch ids (from 0 again) are never
mistaken for ones already written.
"""

from __future__ import annotations

from delta.tables import DeltaMergeBuilder
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.local.auto_cdc.changes import REJECT_REASON
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.warehouse import delta_version


def idempotent_merge(spark: SparkSession, app_id: str, batch_id: int, merge: DeltaMergeBuilder,
                     path: str) -> bool:
    """Execute the MERGE unless (app_id, batch_id) already committed to the table at `path`;
    whether this call committed it.

    MERGE takes no writer options, so the marker goes through the session's settings: `spark`
    must be the streaming query's own session when flows run concurrently.
    """
    before = delta_version(path)
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
    try:
        merge.execute()
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    return delta_version(path) > before


def record_rejected(events: DataFrame, source_columns: list[str], spec: AutoCdcSpec,
                    batch_id: int, rejected_path: str | None, query_id: str) -> None:
    """Append the tagged batch's rejected events to the rejected-rows table (once per batch).

    Columns: flow, batch_id, reason, record (the source row as JSON), rejected_at.
    """
    rejected = events.where(F.col(REJECT_REASON) != "")
    if rejected_path:
        # Every field, NULLs included: a row rejected for a NULL key shows the key as null.
        record = F.to_json(F.struct(*[F.col(f"`{c}`") for c in source_columns]),
                           {"ignoreNullFields": "false"})
        rejected.select(F.lit(spec.name).alias("flow"),
                        F.lit(batch_id).cast("bigint").alias("batch_id"),
                        F.col(REJECT_REASON).alias("reason"), record.alias("record"),
                        F.current_timestamp().alias("rejected_at")) \
            .write.format("delta").mode("append") \
            .option("txnAppId", f"{query_id}:{spec.name}:rejected") \
            .option("txnVersion", batch_id) \
            .save(rejected_path)
