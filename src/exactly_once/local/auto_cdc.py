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
batches, and the same as SCD2 decides (auto_cdc_scd2.py; docs/auto_cdc.md "Ties").

The two MERGEs are two Delta commits. Each carries Delta's idempotent-write marker
(txnAppId = streaming query id + flow + table, txnVersion = batch id), as Spark's own Delta sink
does with its query id: when a crash between them makes Structured Streaming replay the batch,
the MERGE that already committed is skipped and the other runs against the same state as the
first time, so the tables end as if nothing had failed. A new checkpoint is a new query id, so
its batch ids (from 0 again) are never mistaken for ones already written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from delta.tables import DeltaMergeBuilder, DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from exactly_once.local.auto_cdc_spec import AutoCdcSpec
from exactly_once.local.warehouse import delta_version

SEQUENCE = "__sequence"
TIE = "__tie"  # breaks equal sequences: struct(deleted, content hash)
IS_DELETE = "__is_delete"
IS_TRUNCATE = "__is_truncate"
DELETED_AT = "__deleted_at"  # processing time a tombstone was written: its retention clock
SYNTHETIC = "__from_truncate"
REJECT_REASON = "__reject_reason"
STORED_SEQUENCE = "__stored_sequence"
STORED_TIE = "__stored_tie"
STORED_DELETED = "__stored_deleted"
RESET = "__reset"
CHANGE_COLUMNS = (SEQUENCE, IS_DELETE, IS_TRUNCATE, SYNTHETIC, REJECT_REASON)


@dataclass
class CdcBatchStats:
    rejected: int = 0  # NULL key or sequence
    upserts: int = 0
    deletes: int = 0
    stale: int = 0  # older than what the batch or the table already had
    truncates: int = 0

    def add(self, other: CdcBatchStats) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def target_columns(spec: AutoCdcSpec, source_columns: list[str]) -> list[str]:
    if spec.column_list is not None:
        missing = set(spec.column_list) - set(source_columns)
        if missing:
            raise ValueError(f"{spec.name}: column_list names unknown columns {sorted(missing)}")
        return [*(k for k in spec.keys if k not in spec.column_list), *spec.column_list]
    excluded = set(spec.except_column_list or ())
    return [c for c in source_columns if c not in excluded]


def data_columns(spec: AutoCdcSpec, source_columns: list[str]) -> list[str]:
    """The target's columns other than the keys."""
    return [c for c in target_columns(spec, source_columns) if c not in spec.keys]


def target_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    return source.select(*target_columns(spec, source.columns)).schema


def tie_break(columns: list[str]) -> Column:
    """What decides between events with equal sequences: a delete first, then the content.

    A hash of the target columns, not the Kafka offset or arrival order: a redelivery has the
    same content, so it decides nothing, and every replay decides the same way.
    """
    content = F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]),
                        {"ignoreNullFields": "false"})
    return F.struct(F.col(IS_DELETE).alias("deleted"), F.sha2(content, 256).alias("content"))


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
    if not (Path(state_path) / "_delta_log").is_dir():
        spark.createDataFrame([], schema).write.format("delta").save(state_path)
        return
    existing = set(spark.read.format("delta").load(state_path).columns)
    for column in (DELETED_AT, TIE):
        if column not in existing:
            spark.sql(f"ALTER TABLE delta.`{state_path}` ADD COLUMNS "
                      f"({column} {schema[column].dataType.simpleString()})")


def rejected_rows_path(state_path: str) -> str:
    """`<warehouse>/_pipeline/auto_cdc/<target>__rejected`, next to the target's state."""
    return f"{state_path.rstrip('/')}__rejected"


def tag_events(events: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """SEQUENCE, IS_DELETE, IS_TRUNCATE and the reason ('' if none) to reject the event."""
    def flag(condition: Column | None) -> Column:
        return F.lit(False) if condition is None else F.coalesce(condition, F.lit(False))

    tagged = events.withColumn(SEQUENCE, spec.sequence_by) \
        .withColumn(IS_TRUNCATE, flag(spec.apply_as_truncates)) \
        .withColumn(IS_DELETE, flag(spec.apply_as_deletes) & ~F.col(IS_TRUNCATE)) \
        .withColumn(SYNTHETIC, F.lit(False))
    sequence_type = tagged.schema[SEQUENCE].dataType
    null_sequence = F.col(SEQUENCE).isNull()
    if isinstance(sequence_type, StructType):  # a struct sequence counts as NULL if any field is
        for f in sequence_type.fields:
            null_sequence = null_sequence | F.col(f"{SEQUENCE}.`{f.name}`").isNull()
    null_key = F.lit(False)
    for k in spec.keys:
        null_key = null_key | F.col(f"`{k}`").isNull()
    null_key = null_key & ~F.col(IS_TRUNCATE)  # a truncate names no key
    reason = F.concat_ws("; ", F.when(null_key, F.lit(f"null key ({', '.join(spec.keys)})")),
                         F.when(null_sequence, F.lit("null sequence")))
    return tagged.withColumn(REJECT_REASON, reason)


def batch_counts(events: DataFrame) -> Row:
    """One aggregation over the tagged batch: `total`, `rejected`, `truncates` (accepted)."""
    rejected = F.col(REJECT_REASON) != ""
    return events.agg(F.count(F.lit(1)).alias("total"), F.count_if(rejected).alias("rejected"),
                      F.count_if(~rejected & F.col(IS_TRUNCATE)).alias("truncates")).first()


def record_rejected(events: DataFrame, source_columns: list[str], spec: AutoCdcSpec,
                    batch_id: int, rejected_path: str | None, query_id: str) -> None:
    """Append rejected events to the rejected-rows table (idempotent per batch).

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


def fill_null_updates(events: DataFrame, spec: AutoCdcSpec, columns: list[str]) -> DataFrame:
    """NULL columns take the key's previous value in the batch since its last delete.

    RESET marks events that follow a delete of the same batch: they replace the row entirely
    instead of keeping the target's values where they are NULL.
    """
    order = [SEQUENCE, TIE] if TIE in events.columns else [SEQUENCE]
    so_far = Window.partitionBy(*spec.keys).orderBy(*order) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    events = events.withColumn("__life", F.sum(F.col(IS_DELETE).cast("int")).over(so_far))
    in_life = Window.partitionBy(*spec.keys, "__life").orderBy(*order) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    filled = [F.last(F.when(~F.col(IS_DELETE), F.col(f"`{c}`")), ignorenulls=True)
              .over(in_life).alias(c)
              if c in columns else F.col(f"`{c}`") for c in events.columns]
    return events.select(*filled).withColumn(RESET, F.col("__life") > 0).drop("__life")


def _idempotent_merge(spark: SparkSession, app_id: str, batch_id: int, merge: DeltaMergeBuilder,
                      path: str) -> bool:
    """Execute the MERGE unless (app_id, batch_id) already committed to the table at `path`;
    whether this call committed it."""
    before = delta_version(path)
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
    try:
        merge.execute()
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    return delta_version(path) > before


def collect_tombstones(spark: SparkSession, state_path: str, retention_seconds: float) -> int:
    """Remove tombstones written more than `retention_seconds` ago (processing time)."""
    age_micros = F.unix_micros(F.current_timestamp()) - F.unix_micros(F.col(DELETED_AT))
    expired = F.col(IS_DELETE) & (age_micros > F.lit(int(retention_seconds * 1_000_000)))
    state = DeltaTable.forPath(spark, state_path)
    count = state.toDF().where(expired).count()
    if count:  # a DELETE commits even when nothing matches; keep the state log short
        state.delete(expired)
    return count


def merge_condition(spec: AutoCdcSpec, extra: tuple[str, ...] = ()) -> str:
    return " AND ".join(f"t.`{k}` = s.`{k}`" for k in (*spec.keys, *extra))


def apply_scd1_batch(spark: SparkSession, batch: DataFrame, batch_id: int, spec: AutoCdcSpec,
                     target_path: str, state_path: str, *, query_id: str,
                     rejected_path: str | None = None,
                     tombstone_gc_seconds: float | None = None) -> CdcBatchStats:
    """Apply one micro-batch. `query_id`: the streaming query's id (its checkpoint's identity),
    part of every idempotent-write marker."""
    columns = data_columns(spec, batch.columns)
    events = tag_events(batch, spec).persist()
    try:
        total, rejected, truncates = batch_counts(events)
        if rejected:
            record_rejected(events, batch.columns, spec, batch_id, rejected_path, query_id)
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
            counts = changes.agg(F.count(F.lit(1)).alias("applied"),
                                 F.count_if(F.col(IS_DELETE)).alias("deletes"),
                                 F.count_if(F.col(SYNTHETIC)).alias("from_truncates")).first()
            applied, deletes, from_truncates = counts["applied"], counts["deletes"], \
                counts["from_truncates"]
            values = {f"`{c}`": f"s.`{c}`" for c in target_columns(spec, batch.columns)}
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
            committed = _idempotent_merge(spark, f"{query_id}:{spec.name}:target", batch_id,
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
            _idempotent_merge(spark, f"{query_id}:{spec.name}:state", batch_id, state_merge,
                              state_path)
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
