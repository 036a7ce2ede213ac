"""AUTO CDC (SCD type 1) on Delta: order-aware upserts and deletes, one micro-batch at a time.

Per batch:
1. events with a NULL key or sequence are rejected: written with their reason to the flow's
   rejected-rows table (see `record_rejected`), never merged;
2. a truncate event (`apply_as_truncates`) becomes a delete at its sequence for every live key;
3. events not newer than the key's stored sequence are dropped (stale): the state table keeps
   each key's last applied sequence, also after a delete (a tombstone), so an older event,
   whenever it arrives, can neither overwrite newer state nor resurrect a deleted row;
4. per key only the newest remaining event survives (with `ignore_null_updates`, its NULL
   columns first take the values of the key's earlier events in the batch);
5. one MERGE into the target, then one MERGE into the state table, then tombstones older than
   `pipelines.cdc.tombstoneGCThresholdInSeconds` are removed from the state table.

Order is total: events compare by (sequence, TIE), TIE being (is it a delete, hash of the
event's target columns). So at equal sequences a delete wins over an upsert and two different
upserts resolve by their content, the same whichever arrives first, in one batch or across
batches, and the same as SCD2 decides (scd2.py; docs/auto_cdc.md "Ties").

The two MERGEs are two Delta commits, each idempotent per batch (commits.py): when a crash
between them makes Structured Streaming replay the batch, the MERGE that already committed is
skipped and the other runs against the same state as the first time, so the tables end as if
nothing had failed.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from exactly_once.local.auto_cdc import commits
from exactly_once.local.auto_cdc.changes import (
    IS_DELETE,
    IS_TRUNCATE,
    REJECT_REASON,
    RESET,
    SEQUENCE,
    SYNTHETIC,
    TIE,
    CdcBatchStats,
    batch_counts,
    data_columns,
    fill_null_updates,
    merge_condition,
    tag_events,
    target_columns,
    tie_break,
)
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.warehouse import AutoCdcTables, is_delta_table
from exactly_once.table_properties import TOMBSTONE_GC_NEVER_SECONDS

DELETED_AT = "__deleted_at"  # processing time a tombstone was written: its retention clock
STORED_SEQUENCE = "__stored_sequence"
STORED_TIE = "__stored_tie"
STORED_DELETED = "__stored_deleted"


def target_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    return source.select(*target_columns(spec, source.columns)).schema


def state_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    tagged = tag_events(source, spec)
    return tagged.select(
        *spec.keys, SEQUENCE, IS_DELETE, F.lit(None).cast("timestamp").alias(DELETED_AT),
        tie_break(data_columns(spec, source.columns)).alias(TIE)).schema


def ensure_state_table(spark: SparkSession, spec: AutoCdcSpec, source: DataFrame,
                       state_path: str) -> None:
    """Create the state table, or add the columns later versions added (`__deleted_at`,
    `__tie`) to one written before them."""
    schema = state_schema(spec, source)
    if not is_delta_table(state_path):
        spark.createDataFrame([], schema).write.format("delta").save(state_path)
        return
    existing = set(spark.read.format("delta").load(state_path).columns)
    for column in (DELETED_AT, TIE):
        if column not in existing:
            spark.sql(f"ALTER TABLE delta.`{state_path}` ADD COLUMNS "
                      f"({column} {schema[column].dataType.simpleString()})")


def latest_per_key(events: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """Per key, the one event with the highest sequence (events carry SEQUENCE already)."""
    newest_first = Window.partitionBy(*spec.keys).orderBy(
        F.col(SEQUENCE).desc(), F.col(TIE).desc(), F.col(SYNTHETIC).asc())
    return events.withColumn("__rank", F.row_number().over(newest_first)) \
        .where("__rank = 1").drop("__rank")


def _truncates_as_deletes(events: DataFrame, stored: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """The batch's newest truncate, as a delete at its sequence of every live or batch key."""
    truncate_at = events.where(F.col(IS_TRUNCATE)).agg(F.max(SEQUENCE).alias(SEQUENCE)) \
        .where(F.col(SEQUENCE).isNotNull())
    regular = events.where(~F.col(IS_TRUNCATE))
    keys = stored.where(~F.col(STORED_DELETED)).select(*spec.keys) \
        .union(regular.select(*spec.keys)).distinct()
    deletes = keys.crossJoin(truncate_at).select(
        *spec.keys, SEQUENCE, F.lit(True).alias(IS_DELETE), F.lit(False).alias(IS_TRUNCATE),
        F.lit(True).alias(SYNTHETIC))
    return regular.unionByName(deletes, allowMissingColumns=True)


def collect_tombstones(spark: SparkSession, state_path: str, retention_seconds: float) -> int:
    """Remove tombstones written more than `retention_seconds` ago (processing time)."""
    age_micros = F.unix_micros(F.current_timestamp()) - F.unix_micros(F.col(DELETED_AT))
    expired = F.col(IS_DELETE) & (age_micros > F.lit(int(retention_seconds * 1_000_000)))
    state = DeltaTable.forPath(spark, state_path)
    count = state.toDF().where(expired).count()
    if count:  # a DELETE commits even when nothing matches; keep the state log short
        state.delete(expired)
    return count


def apply_scd1_batch(spark: SparkSession, batch: DataFrame, batch_id: int, spec: AutoCdcSpec,
                     target_path: str, state_path: str, *, query_id: str,
                     rejected_path: str | None = None,
                     tombstone_gc_seconds: float | None = None) -> CdcBatchStats:
    """Apply one micro-batch. `query_id`: the streaming query's id (its checkpoint's identity),
    part of every idempotent-write marker."""
    columns = data_columns(spec, batch.columns)
    events = tag_events(batch, spec).persist()
    try:
        counted = batch_counts(events)
        total, rejected, truncates = counted.total, counted.rejected, counted.truncates
        if rejected:
            commits.record_rejected(events, batch.columns, spec, batch_id, rejected_path, query_id)
        good = events.where(F.col(REJECT_REASON) == "").drop(REJECT_REASON)
        state = spark.read.format("delta").load(state_path)
        stored = state.select(*spec.keys, F.col(SEQUENCE).alias(STORED_SEQUENCE),
                              F.col(TIE).alias(STORED_TIE),
                              F.col(IS_DELETE).alias(STORED_DELETED))
        if truncates:
            good = _truncates_as_deletes(good, stored, spec)
        good = good.withColumn(TIE, tie_break(columns))
        lowest_tie = F.struct(F.lit(False).alias("deleted"), F.lit("").alias("content"))
        newer = F.struct(F.col(SEQUENCE).alias("s"), F.col(TIE).alias("t")) > F.struct(
            F.col(STORED_SEQUENCE).alias("s"),
            F.coalesce(F.col(STORED_TIE), lowest_tie).alias("t"))
        fresh = good.join(stored, list(spec.keys), "left").where(
            F.col(STORED_SEQUENCE).isNull() | newer
        ).drop(STORED_SEQUENCE, STORED_TIE, STORED_DELETED)
        if spec.ignore_null_updates:
            fresh = fill_null_updates(fresh, spec, columns)
        changes = latest_per_key(fresh, spec).persist()
        try:
            (counts,) = changes.agg(F.count(F.lit(1)).alias("applied"),
                                    F.count_if(F.col(IS_DELETE)).alias("deletes"),
                                    F.count_if(F.col(SYNTHETIC)).alias("from_truncates")
                                    ).collect()
            applied, deletes, from_truncates = counts["applied"], counts["deletes"], \
                counts["from_truncates"]
            values: dict[str, str | Column] = {
                f"`{c}`": f"s.`{c}`" for c in target_columns(spec, batch.columns)}
            updates = dict(values)
            if spec.ignore_null_updates:  # NULL keeps the target's value, unless re-inserted
                updates.update({f"`{c}`": f"CASE WHEN s.{RESET} THEN s.`{c}` "
                                          f"ELSE coalesce(s.`{c}`, t.`{c}`) END" for c in columns})
            target_merge = (
                DeltaTable.forPath(spark, target_path).alias("t")
                .merge(changes.alias("s"), merge_condition(spec))
                .whenMatchedDelete(condition=f"s.{IS_DELETE}")
                .whenMatchedUpdate(condition=f"NOT s.{IS_DELETE}", set=updates)
                .whenNotMatchedInsert(condition=f"NOT s.{IS_DELETE}", values=values)
            )
            committed = commits.idempotent_merge(spark, f"{query_id}:{spec.name}:target", batch_id,
                                          target_merge, target_path)
            new_state = changes.select(
                *spec.keys, SEQUENCE, IS_DELETE,
                F.when(F.col(IS_DELETE), F.current_timestamp()).alias(DELETED_AT), TIE)
            state_merge = (
                DeltaTable.forPath(spark, state_path).alias("t")
                .merge(new_state.alias("s"), merge_condition(spec))
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
            )
            commits.idempotent_merge(spark, f"{query_id}:{spec.name}:state", batch_id,
                                     state_merge, state_path)
        finally:
            changes.unpersist()
        if tombstone_gc_seconds is not None:
            collect_tombstones(spark, state_path, tombstone_gc_seconds)
        stale = total - rejected - truncates - (applied - from_truncates)
        if not committed:  # an earlier attempt of this batch wrote the target: report nothing
            applied = deletes = 0
        return CdcBatchStats(rejected=rejected, upserts=applied - deletes, deletes=deletes,
                             stale=stale, truncates=truncates)
    finally:
        events.unpersist()


def tombstone_expiry_seconds(spec: AutoCdcSpec) -> float | None:
    """How long the target's tombstones live; None when they are kept for good, so a batch
    skips the GC pass (the project's pipeline files keep them, `TOMBSTONES_KEPT`)."""
    seconds = spec.tombstone_gc_seconds()
    return None if seconds >= TOMBSTONE_GC_NEVER_SECONDS else seconds


def apply_batch(spark: SparkSession, batch: DataFrame, batch_id: int, spec: AutoCdcSpec,
                tables: AutoCdcTables, *, query_id: str) -> CdcBatchStats:
    """`apply_scd1_batch` on the flow's own tables, with its declared tombstone expiry."""
    return apply_scd1_batch(spark, batch, batch_id, spec, tables.target, tables.state,
                            query_id=query_id, rejected_path=tables.rejected,
                            tombstone_gc_seconds=tombstone_expiry_seconds(spec))
