"""AUTO CDC (SCD type 1) on Delta: order-aware upserts and deletes, one micro-batch at a time.

Per batch:
1. events with a NULL key or sequence are rejected: written with their reason to the flow's
   rejected-rows table (see `record_rejected`), never merged;
2. a truncate event (`apply_as_truncates`) becomes a delete at its sequence for every live key;
3. events not newer than the key's stored sequence are dropped (stale): the state table keeps
   each key's last applied sequence, also after a delete (a tombstone), so an older event,
   whenever it arrives, can neither overwrite newer state nor resurrect a deleted row;
4. per key only the newest remaining event survives (one `max_by` aggregation; with
   `ignore_null_updates`, its NULL columns first take the values of the key's earlier events in
   the batch);
5. one MERGE into the target (an append when it holds none of the batch's keys, as an empty
   one; none when nothing changes it), then
   the applied changes are appended to the state table, then tombstones older than
   `pipelines.cdc.tombstoneGCThresholdInSeconds` are removed from the state table (a pass
   that reads the whole state table, skipped when the state log's file statistics show no
   tombstone that old: see `tombstones_may_have_expired`).

Steps 1-4 are one Spark job. The state table is a log: each applied change appends one row
(keys, sequence, tie-break, delete flag, when it was deleted), and a key's stored state is its
newest row. Appending costs a write; a MERGE into it would also join and rewrite it every batch.
A state table written by an earlier version (one row per key, updated in place) reads the same.

Order is total: events compare by (sequence, TIE), TIE being (is it a delete, hash of the
event's target columns). So at equal sequences a delete wins over an upsert and two different
upserts resolve by their content, the same whichever arrives first, in one batch or across
batches, and the same as SCD2 decides (scd2.py; docs/auto_cdc.md "Ties").

The MERGE and the append are two Delta commits, each idempotent per batch (commits.py): every
decision comes from the state table, which is written last, so when a crash between them makes
Structured Streaming replay the batch, the committed MERGE is skipped and the append writes
the rows the first attempt would have written.
"""

from __future__ import annotations

from datetime import datetime, timezone

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, Observation, SparkSession
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
    batch_counts_observed,
    batch_plan,
    data_columns,
    fill_null_updates,
    merge_condition,
    null_ignoring,
    observed_counts,
    state_of_keys,
    tag_events,
    target_columns,
    tie_break,
)
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.one_task import SPARK_PLAN, BatchPlan
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.engine.materialize import computed_once, in_driver
from exactly_once.local.engine.sql_columns import column, from_source, identifier, struct_of
from exactly_once.local.storage import delta_log, schema_evolution
from exactly_once.local.storage.delta_log import is_delta_table
from exactly_once.local.storage.warehouse import (
    AutoCdcTables,
    as_written,
    create_empty_table,
    statistics_of,
    table_columns,
)
from exactly_once.table_properties import TOMBSTONE_GC_NEVER_SECONDS

DELETED_AT = "__deleted_at"  # processing time a tombstone was written: its retention clock
STORED_SEQUENCE = "__stored_sequence"
STORED_TIE = "__stored_tie"
STORED_DELETED = "__stored_deleted"
IN_TARGET = "__in_target"  # whether the state table says the target holds the change's key
LOWEST_TIE = "struct(false AS deleted, '' AS content)"  # below every stored tie-break (SQL)


def target_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    return source.selectExpr(*map(identifier, target_columns(spec, source.columns))).schema


def state_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    tagged = tag_events(source, spec)
    return tagged.select(
        *map(column, spec.keys), SEQUENCE, IS_DELETE,
        F.lit(None).cast("timestamp").alias(DELETED_AT),
        tie_break(data_columns(spec, source.columns)).alias(TIE)).schema


def ensure_state_table(spark: SparkSession, spec: AutoCdcSpec, source: DataFrame,
                       state_path: str, evolve: bool = False) -> None:
    """Create the state table, or add the columns later versions added (`__deleted_at`,
    `__tie`) to one written before them; with `evolve`, widen the keys and the sequence as the
    source widened them (schema_evolution.py).

    Run before every update's batches: an existing table's columns come from its log
    (`warehouse.table_columns`), so a table that has them costs no query plan and no Delta
    snapshot."""
    if not is_delta_table(state_path):
        # The tombstones' GC reads the statistics of `__deleted_at` alone
        # (`tombstones_may_have_expired`).
        create_empty_table(spark, state_path, as_written(state_schema(spec, source)),
                           statistics_of([DELETED_AT]))
        return
    if evolve:
        schema_evolution.evolve(spark, state_path, as_written(state_schema(spec, source)))
    existing = table_columns(spark, state_path)
    missing = [name for name in (DELETED_AT, TIE) if name not in existing]
    if missing:
        schema = state_schema(spec, source)
        for name in missing:
            spark.sql(f"ALTER TABLE delta.`{state_path}` ADD COLUMNS "
                      f"({name} {schema[name].dataType.simpleString()})")


def latest_per_key(events: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """Per key, the one event with the highest (SEQUENCE, TIE), a real event before a truncate's
    synthetic delete at the same point: one aggregation (events carry SEQUENCE and TIE)."""
    others = [c for c in events.columns if c not in spec.keys]
    rank = F.expr(f"struct({SEQUENCE}, {TIE}, NOT {SYNTHETIC} AS real)")
    keys = [column(k) for k in spec.keys]
    # The row's fields back as columns by `__row.*`: one expression, not two calls a column.
    return events.groupBy(*keys).agg(F.max_by(struct_of(others), rank).alias("__row")) \
        .select(*keys, F.col("__row.*"))


def stored_state(spark: SparkSession, state_path: str, spec: AutoCdcSpec,
                 of_keys: DataFrame | None = None, plan: BatchPlan = SPARK_PLAN) -> DataFrame:
    """Each key's stored state: its newest row in the state log, as STORED_* columns; of the
    keys `of_keys` holds, when given (`changes.state_of_keys`), read as `plan` says."""
    state = state_of_keys(spark, state_path, of_keys, spec, plan)
    tie = f"coalesce({TIE}, {LOWEST_TIE})"  # rows written before ties were stored
    last = F.expr(f"max_by(struct({SEQUENCE} AS s, {tie} AS t, {IS_DELETE} AS d, "
                  f"{DELETED_AT} AS at), struct({SEQUENCE}, {tie})) AS __last")
    return state.groupBy(*map(column, spec.keys)).agg(last).selectExpr(
        *[identifier(k) for k in spec.keys], f"__last.s AS {STORED_SEQUENCE}",
        f"__last.t AS {STORED_TIE}", f"__last.d AS {STORED_DELETED}", f"__last.at AS {DELETED_AT}")


def _truncates_as_deletes(events: DataFrame, stored: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """The batch's newest truncate, as a delete at its sequence of every live or batch key."""
    truncate_at = events.where(F.col(IS_TRUNCATE)).agg(F.max(SEQUENCE).alias(SEQUENCE)) \
        .where(F.col(SEQUENCE).isNotNull())
    regular = events.where(~F.col(IS_TRUNCATE))
    keys = stored.where(~F.col(STORED_DELETED)).select(*map(column, spec.keys)) \
        .union(regular.select(*map(column, spec.keys))).distinct()
    deletes = keys.crossJoin(truncate_at).select(
        *map(column, spec.keys), SEQUENCE, F.lit(True).alias(IS_DELETE),
        F.lit(False).alias(IS_TRUNCATE), F.lit(True).alias(SYNTHETIC))
    return regular.unionByName(deletes, allowMissingColumns=True)


def expired_tombstones(spark: SparkSession, state_path: str, spec: AutoCdcSpec,
                       retention_seconds: float) -> DataFrame:
    """The keys whose stored state is a tombstone written more than `retention_seconds` ago
    (processing time), computed now: rows, not a plan that reads the state table."""
    age_micros = F.unix_micros(F.current_timestamp()) - F.unix_micros(F.col(DELETED_AT))
    expired = stored_state(spark, state_path, spec).where(
        F.col(STORED_DELETED) & (age_micros > F.lit(int(retention_seconds * 1_000_000)))) \
        .select(*map(column, spec.keys))
    return in_driver(expired)


def collect_tombstones(spark: SparkSession, state_path: str, spec: AutoCdcSpec,
                       retention_seconds: float) -> None:
    """Forget the expired tombstones' keys: every row of the key goes, so an older event is
    applied as new."""
    keys = expired_tombstones(spark, state_path, spec, retention_seconds)
    if not keys.isEmpty():  # a DELETE commits even when nothing matches; keep the log short
        DeltaTable.forPath(spark, state_path).alias("t") \
            .merge(keys.alias("s"), merge_condition(spec)).whenMatchedDelete().execute()


# How much older than now the oldest tombstone must look to be certainly unexpired: covers the
# time between this check and when the GC pass would have read the clock.
EXPIRY_MARGIN_SECONDS = 5.0


def tombstones_may_have_expired(state_path: str, retention_seconds: float) -> bool:
    """Whether a GC pass could find a tombstone older than `retention_seconds`.

    False only when the state log's file statistics (Delta's per-file `nullCount` and
    `minValues` of `__deleted_at`, read from the commit files: no Spark job) show that no row
    has a deletion time older than the retention, with a margin: no tombstone at all (a flow
    without deletes, such as an idempotent ledger), or only recent ones. The pass would then
    remove nothing, and it costs a read of the whole state table (a snapshot and a join:
    Spark jobs) in every batch. Anything the statistics cannot tell (no statistics, a state
    table written before `__deleted_at`, cleaned-up commits) answers True.
    """
    files = delta_log.live_file_stats(state_path)
    if files is None:
        return True
    oldest: datetime | None = None
    for stats in files:
        if stats is None or "numRecords" not in stats \
                or DELETED_AT not in (stats.get("nullCount") or {}):
            return True
        if stats["nullCount"][DELETED_AT] >= stats["numRecords"]:
            continue  # no row of this file is a tombstone with a deletion time
        minimum = (stats.get("minValues") or {}).get(DELETED_AT)
        if minimum is None:
            return True
        deleted_at = datetime.fromisoformat(minimum)
        oldest = deleted_at if oldest is None else min(oldest, deleted_at)
    if oldest is None:
        return False
    age = (datetime.now(timezone.utc) - oldest).total_seconds()
    return age + EXPIRY_MARGIN_SECONDS > retention_seconds


def apply_scd1_batch(spark: SparkSession, batch: DataFrame, spec: AutoCdcSpec,
                     target_path: str, state_path: str, write: BatchWrite, *,
                     rejected_path: str | None = None,
                     tombstone_gc_seconds: float | None = None) -> CdcBatchStats:
    """Apply one micro-batch; `write` says which (and its query), for the commit markers."""
    with write.step("plan"):
        plan = batch_plan(batch, spec, state_path)
        changes, tagged, observed, counts = _plan_changes(spark, plan.read(batch), spec,
                                                          state_path, plan)
    with write.step("changes"):
        # One job: the batch's changes, kept (engine/materialize.py), counted with the batch
        # on the way. Not a cache: the writes below read the changes without the state table
        # they came from, which would make Delta treat the state append as a read of the
        # table it writes (a full state reconstruction for conflict checks).
        changes = computed_once(changes)
    counted = observed_counts(observed)
    total, rejected, truncates = counted.total, counted.rejected, counted.truncates
    if rejected:
        with write.step("rejected rows"):
            commits.record_rejected(tagged, batch.columns, spec, rejected_path, write)
    applied, deletes, from_truncates, in_target = (int(counts.get[c]) for c in (
        "applied", "deletes", "from_truncates", "in_target"))
    committed = applied > 0 and _apply(spark, spec, changes, batch.columns,
                                       null_ignoring(spec, data_columns(spec, batch.columns)),
                                       applied == deletes,
                                       in_target > 0, target_path, state_path, write)
    if tombstone_gc_seconds is not None \
            and tombstones_may_have_expired(state_path, tombstone_gc_seconds):
        collect_tombstones(spark, state_path, spec, tombstone_gc_seconds)
    stale = total - rejected - truncates - (applied - from_truncates)
    if not committed:  # nothing new, or an earlier attempt of this batch wrote the target
        applied = deletes = 0
    return CdcBatchStats(rejected=rejected, upserts=applied - deletes, deletes=deletes,
                         stale=stale, truncates=truncates)


def _plan_changes(spark: SparkSession, batch: DataFrame, spec: AutoCdcSpec, state_path: str,
                  plan: BatchPlan) -> tuple[DataFrame, DataFrame, Observation, Observation]:
    """The batch's changes (newest fresh event per key), the tagged batch, and the two
    observations that count them when the changes are computed."""
    columns = data_columns(spec, batch.columns)
    tagged = tag_events(batch, spec)
    observed = Observation()
    good = batch_counts_observed(tagged, observed).where(F.col(REJECT_REASON) == "") \
        .drop(REJECT_REASON)
    # Only the batch's keys' state, but a truncate deletes every live key: it needs them all.
    stored = stored_state(spark, state_path, spec,
                          of_keys=batch if spec.apply_as_truncates is None else None, plan=plan
                          ).drop(DELETED_AT)
    if spec.apply_as_truncates is not None:
        good = _truncates_as_deletes(good, stored, spec)
    good = good.withColumn(TIE, tie_break(columns))
    newer = f"struct({SEQUENCE} AS s, {TIE} AS t) > " \
        f"struct({STORED_SEQUENCE} AS s, coalesce({STORED_TIE}, {LOWEST_TIE}) AS t)"
    # A key is in the target unless it was never applied or its last change was a delete
    # (unknown, as for a state row without its delete flag, counts as in it).
    held = f"coalesce({STORED_SEQUENCE} IS NOT NULL AND NOT {STORED_DELETED}, true)"
    fresh = good.join(plan.join_side(stored), list(spec.keys), "left").where(
        F.expr(f"{STORED_SEQUENCE} IS NULL OR {newer}")
    ).withColumn(IN_TARGET, F.expr(held)).drop(STORED_SEQUENCE, STORED_TIE, STORED_DELETED)
    ignored = null_ignoring(spec, columns)
    if ignored:
        fresh = fill_null_updates(fresh, spec, ignored)
    counts = Observation()
    changes = latest_per_key(fresh, spec).observe(
        counts, F.expr("count(1) AS applied"), F.expr(f"count_if({IS_DELETE}) AS deletes"),
        F.expr(f"count_if({SYNTHETIC}) AS from_truncates"),
        F.expr(f"count_if({IN_TARGET}) AS in_target"))
    return changes, tagged, observed, counts


def _apply(spark: SparkSession, spec: AutoCdcSpec, changes: DataFrame, source_columns: list[str],
           ignored: list[str], only_deletes: bool, holds_keys: bool, target_path: str,
           state_path: str, write: BatchWrite) -> bool:
    """The target's write, then the state rows; whether this call applied the batch.

    When the target holds none of the changes' keys the MERGE could only insert the upserts,
    and deletes change nothing: the upserts are appended instead, one write job where Delta's
    MERGE rebuilds the target's state, scans it and joins it with the changes. So it is for an
    empty target (its log says no rows; a new warehouse's first update took about 0.87 of its
    time) and for a batch of keys new to the target, which the state table tells
    (`holds_keys` False) once it has recorded the target's last write
    (`commits.state_caught_up`): an idempotent ledger's every batch. Either commit carries the
    batch's marker (commits.py).
    """
    order = target_columns(spec, source_columns)
    committed = True
    if delta_log.row_count(target_path) == 0 or (
            not holds_keys and commits.state_caught_up(target_path, state_path)):
        if not only_deletes:
            with write.step("target append"):
                committed = commits.append_once(
                    changes.where(~F.col(IS_DELETE)).selectExpr(*map(identifier, order)),
                    target_path, spec, "target", write)
    else:
        values = from_source(order)
        updates = dict(values)
        # NULL keeps the target's value where NULLs are ignored, unless re-inserted
        updates.update({identifier(c): f"CASE WHEN s.{RESET} THEN s.{identifier(c)} "
                                       f"ELSE coalesce(s.{identifier(c)}, t.{identifier(c)}) END"
                        for c in ignored})
        target_merge = (
            DeltaTable.forPath(spark, target_path).alias("t")
            .merge(changes.alias("s"), merge_condition(spec))
            .whenMatchedDelete(condition=f"s.{IS_DELETE}")
            .whenMatchedUpdate(condition=f"NOT s.{IS_DELETE}", set=updates)
            .whenNotMatchedInsert(condition=f"NOT s.{IS_DELETE}", values=values)
        )
        with write.step("target merge"):
            committed = commits.merge_once(spark, target_merge, target_path, spec, "target",
                                           write)
    new_state = changes.select(
        *map(column, spec.keys), SEQUENCE, IS_DELETE,
        F.when(F.col(IS_DELETE), F.current_timestamp()).alias(DELETED_AT), TIE)
    with write.step("state append"):
        commits.append_once(new_state, state_path, spec, "state", write)
    return committed


def tombstone_expiry_seconds(spec: AutoCdcSpec) -> float | None:
    """How long the target's tombstones live; None when they are kept for good, so a batch
    skips the GC pass (the project's pipeline files keep them, `TOMBSTONES_KEPT`)."""
    seconds = spec.tombstone_gc_seconds()
    return None if seconds >= TOMBSTONE_GC_NEVER_SECONDS else seconds


def apply_batch(spark: SparkSession, batch: DataFrame, spec: AutoCdcSpec,
                tables: AutoCdcTables, write: BatchWrite) -> CdcBatchStats:
    """`apply_scd1_batch` on the flow's own tables, with its declared tombstone expiry."""
    return apply_scd1_batch(spark, batch, spec, tables.target, tables.state, write,
                            rejected_path=tables.rejected,
                            tombstone_gc_seconds=tombstone_expiry_seconds(spec))
