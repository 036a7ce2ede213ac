"""AUTO CDC (SCD type 1) on Delta: order-aware upserts and deletes, one micro-batch at a time.

Per batch:
1. events with a NULL key or sequence are rejected (counted, never merged);
2. per key only the event with the highest sequence survives (several changes of one key in one
   batch collapse to the newest);
3. that event applies only if its sequence is strictly greater than the key's stored sequence,
   kept in a state table that outlives deletes (a tombstone): so an older event, whenever it
   arrives, can neither overwrite newer state nor resurrect a deleted row;
4. one MERGE into the target, then one MERGE into the state table.

The two MERGEs are two Delta commits. Each carries Delta's idempotent-write marker
(txnAppId = flow + table, txnVersion = batch id): when a crash between them makes Structured
Streaming replay the batch, the MERGE that already committed is skipped and the other runs
against the same state as the first time, so the tables end as if nothing had failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from exactly_once.local.auto_cdc_spec import AutoCdcSpec

SEQUENCE = "__sequence"
IS_DELETE = "__is_delete"
STORED_SEQUENCE = "__stored_sequence"


@dataclass
class CdcBatchStats:
    rejected: int = 0  # NULL key or sequence
    upserts: int = 0
    deletes: int = 0
    stale: int = 0  # older than what the batch or the table already had

    def add(self, other: CdcBatchStats) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def target_columns(spec: AutoCdcSpec, source_columns: list[str]) -> list[str]:
    if spec.column_list is not None:
        missing = set(spec.column_list) - set(source_columns)
        if missing:
            raise ValueError(f"{spec.name}: column_list names unknown columns {sorted(missing)}")
        return list(spec.column_list)
    excluded = set(spec.except_column_list or ())
    return [c for c in source_columns if c not in excluded]


def target_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    return source.select(*target_columns(spec, source.columns)).schema


def state_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    return _with_change_columns(source, spec).select(*spec.keys, SEQUENCE, IS_DELETE).schema


def _with_change_columns(events: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    is_delete = F.coalesce(spec.apply_as_deletes, F.lit(False)) if spec.apply_as_deletes \
        is not None else F.lit(False)
    return events.withColumn(SEQUENCE, spec.sequence_by).withColumn(IS_DELETE, is_delete)


def _has_null_key_or_sequence(events: DataFrame, spec: AutoCdcSpec) -> Column:
    """NULL keys, or a NULL sequence; a struct sequence counts as NULL if any field is."""
    sequence_type = events.schema[SEQUENCE].dataType
    parts = [F.col(f"{SEQUENCE}.`{f.name}`") for f in sequence_type.fields] \
        if isinstance(sequence_type, StructType) else []
    cond = F.col(SEQUENCE).isNull()
    for column in [*parts, *(F.col(k) for k in spec.keys)]:
        cond = cond | column.isNull()
    return cond


def latest_per_key(events: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """Per key, the one event with the highest sequence (events carry SEQUENCE already)."""
    newest_first = Window.partitionBy(*spec.keys).orderBy(F.col(SEQUENCE).desc())
    return events.withColumn("__rank", F.row_number().over(newest_first)) \
        .where("__rank = 1").drop("__rank")


def changes_to_apply(latest: DataFrame, state: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """The batch's newest event per key, where it is newer than the key's stored sequence."""
    stored = state.select(*spec.keys, F.col(SEQUENCE).alias(STORED_SEQUENCE))
    return latest.join(stored, list(spec.keys), "left").where(
        F.col(STORED_SEQUENCE).isNull() | (F.col(SEQUENCE) > F.col(STORED_SEQUENCE))
    ).drop(STORED_SEQUENCE)


def _idempotent_merge(spark: SparkSession, app_id: str, batch_id: int, merge) -> None:
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
    try:
        merge.execute()
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


def apply_scd1_batch(spark: SparkSession, batch: DataFrame, batch_id: int, spec: AutoCdcSpec,
                     target_path: str, state_path: str) -> CdcBatchStats:
    events = _with_change_columns(batch, spec).persist()
    try:
        total = events.count()
        bad = _has_null_key_or_sequence(events, spec)
        rejected = events.where(bad).count()
        latest = latest_per_key(events.where(~bad), spec)
        state = spark.read.format("delta").load(state_path)
        changes = changes_to_apply(latest, state, spec).persist()
        try:
            deletes = changes.where(F.col(IS_DELETE)).count()
            applied = changes.count()
            on_keys = " AND ".join(f"t.`{k}` = s.`{k}`" for k in spec.keys)
            columns = DeltaTable.forPath(spark, target_path).toDF().columns
            values = {f"`{c}`": f"s.`{c}`" for c in columns}
            target_merge = (
                DeltaTable.forPath(spark, target_path).alias("t")
                .merge(changes.alias("s"), on_keys)
                .whenMatchedDelete(condition=f"s.{IS_DELETE}")
                .whenMatchedUpdate(condition=f"NOT s.{IS_DELETE}", set=values)
                .whenNotMatchedInsert(condition=f"NOT s.{IS_DELETE}", values=values)
            )
            _idempotent_merge(spark, f"{spec.name}:target", batch_id, target_merge)
            state_merge = (
                DeltaTable.forPath(spark, state_path).alias("t")
                .merge(changes.select(*spec.keys, SEQUENCE, IS_DELETE).alias("s"), on_keys)
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
            )
            _idempotent_merge(spark, f"{spec.name}:state", batch_id, state_merge)
        finally:
            changes.unpersist()
        return CdcBatchStats(rejected=rejected, upserts=applied - deletes, deletes=deletes,
                             stale=total - rejected - applied)
    finally:
        events.unpersist()
