"""AUTO CDC, SCD type 2 on Delta: a history of versions per key, `__START_AT` / `__END_AT`.

A version is a run of consecutive upserts (by sequence) whose tracked columns are equal: it
starts at the first one's sequence, shows the last one's values (an untracked change updates
the version in place), and ends at the next event's sequence: the next version's start, or a
delete, which closes it. `__END_AT IS NULL` marks the current version; a deleted key has none.

The state table (`<warehouse>/_pipeline/auto_cdc/<target>`) is the journal of every applied
event per key (keys, sequence, delete flag, target columns as received), appended to; where two
rows share a key and sequence (an event that won a tie against a journalled one), the one with
the higher tie-break is the event. Per batch:
1. events with a NULL key or sequence are rejected to the rejected-rows table;
2. one event is kept per (key, sequence) inside the batch, the one with the highest tie-break
   (`changes.tie_break`: a delete, else by content), and dropped if the journal already holds
   that (key, sequence) with a tie-break as high (a redelivery); one with a higher tie-break
   replaces the journal's event, so equal sequences resolve as in SCD1, in any arrival order;
3. for the keys the remaining events touch, the journal plus those events are replayed in
   sequence order into versions, so a late event lands where it belongs: it can split a version
   or fill a gap, and an upsert older than a delete makes a closed version, never a current one;
4. those versions replace every row of those keys in the target, in one commit (Delta's
   `replaceWhere` on the keys; into an empty target, an append of the versions), then the
   events are appended to the journal.
Steps 1-2 are one Spark job. Both writes are idempotent per batch (commits.py) and the decisions
come only from the journal, which is written last: a replay after a crash between them skips the
target's write and appends the same journal rows as the first attempt would have.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from exactly_once.errors import FlowError
from exactly_once.local.auto_cdc import commits
from exactly_once.local.auto_cdc.changes import (
    IS_DELETE,
    REJECT_REASON,
    RESET,
    SEQUENCE,
    TIE,
    CdcBatchStats,
    batch_counts_observed,
    batch_plan,
    data_columns,
    distinct_keys,
    fill_null_updates,
    keys_predicate,
    null_ignoring,
    observed_counts,
    rows_of_keys,
    state_of_keys,
    tag_events,
    target_columns,
    tie_break,
)
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.one_task import SPARK_PLAN, BatchPlan
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.engine.materialize import computed_once
from exactly_once.local.engine.sql_columns import column, identifier, struct_of
from exactly_once.local.storage import delta_log, schema_evolution
from exactly_once.local.storage.delta_log import is_delta_table
from exactly_once.local.storage.warehouse import (
    AutoCdcTables,
    as_written,
    create_empty_table,
    statistics_of,
    table_columns,
)

START_AT, END_AT = "__START_AT", "__END_AT"


def tracked_columns(spec: AutoCdcSpec, source_columns: list[str]) -> list[str]:
    """Columns whose change opens a new version (default: every non-key target column; the
    names were checked: `changes.check_columns`)."""
    data = data_columns(spec, source_columns)
    if spec.track_history_column_list is not None:
        return list(spec.track_history_column_list)
    excluded = set(spec.track_history_except_column_list or ())
    return [c for c in data if c not in excluded]


def _nullable(schema: StructType) -> StructType:
    return StructType([StructField(f.name, f.dataType, True) for f in schema.fields])


def target_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    """The target columns, then `__START_AT` and `__END_AT` typed like the sequence."""
    return _nullable(tag_events(source, spec).select(
        *map(column, target_columns(spec, source.columns)),
        F.col(SEQUENCE).alias(START_AT), F.col(SEQUENCE).alias(END_AT)).schema)


def journal_schema(spec: AutoCdcSpec, source: DataFrame) -> StructType:
    """The journal's columns; the table stores them nullable (`as_written`)."""
    return tag_events(source, spec).selectExpr(
        *map(identifier, (*spec.keys, SEQUENCE, IS_DELETE, *data_columns(spec, source.columns)))
    ).schema


def ensure_state_table(spark: SparkSession, spec: AutoCdcSpec, source: DataFrame,
                       state_path: str, evolve: bool = False) -> None:
    """Create the journal, or check that an existing table is one (its columns from its log,
    as scd1.py's: no query plan, no Delta snapshot per update). With `evolve`, the journal
    gains the columns the target gained and widens what it widened (schema_evolution.py): the
    events journalled before hold NULL in a new column, as they would have had they carried
    the field."""
    if not is_delta_table(state_path):
        # Read whole or by a join on the keys, which skips no file: no column's statistics.
        create_empty_table(spark, state_path, as_written(journal_schema(spec, source)),
                           statistics_of([]))
        return
    if evolve:
        schema_evolution.evolve(spark, state_path, as_written(journal_schema(spec, source)),
                                removed_allowed=False)
    # journal_schema's names, without planning its query
    missing = {*spec.keys, SEQUENCE, IS_DELETE, *data_columns(spec, source.columns)} \
        - set(table_columns(spark, state_path))
    if missing:
        # The flow as its update reports any failure: `flow `x` failed: ...` (failures.py).
        raise FlowError(f"flow `{spec.name}` failed: {spec.name}: the AUTO CDC state at "
                        f"{state_path} was not written by this SCD2 flow (no {sorted(missing)}); "
                        "run a full refresh")


def versions_of(history: DataFrame, spec: AutoCdcSpec, columns: list[str],
                tracked: list[str], order: list[str]) -> DataFrame:
    """Replay each key's events (keys, SEQUENCE, IS_DELETE, columns) in sequence order."""
    ignored = null_ignoring(spec, columns)
    if ignored:  # a NULL there keeps the previous event's value, until a delete
        history = fill_null_updates(history, spec, ignored).drop(RESET)
    by_sequence = Window.partitionBy(*map(column, spec.keys)).orderBy(SEQUENCE)
    so_far = by_sequence.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    tracked_value = struct_of(tracked) if tracked else F.lit(True)
    previous_delete = F.lag(IS_DELETE).over(by_sequence)
    opens_version = ~F.col(IS_DELETE) & (
        previous_delete.isNull() | previous_delete
        | ~F.lag(tracked_value).over(by_sequence).eqNullSafe(tracked_value))
    runs = history.withColumn("__next", F.lead(SEQUENCE).over(by_sequence)) \
        .withColumn("__run", F.sum((opens_version | F.col(IS_DELETE)).cast("int")).over(so_far))
    last = F.expr(f"struct({', '.join([*map(identifier, columns), f'__next AS {END_AT}'])})")
    versions = runs.where(~F.col(IS_DELETE)).groupBy(*map(column, spec.keys), "__run").agg(
        F.min(SEQUENCE).alias(START_AT), F.max_by(last, F.col(SEQUENCE)).alias("__last"))
    # SQL strings: a column each, where `F.col(...).alias(...)` was three py4j calls.
    fields = [identifier(c) if c in spec.keys else f"__last.{identifier(c)} AS {identifier(c)}"
              for c in order]
    return versions.selectExpr(*fields, START_AT, f"__last.{END_AT} AS {END_AT}")


def _one_per_sequence(events: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """Per (key, sequence) the event with the highest tie-break (events carry TIE): one
    aggregation."""
    group = [column(c) for c in (*spec.keys, SEQUENCE)]
    others = [c for c in events.columns if c not in (*spec.keys, SEQUENCE)]
    # The row's fields back as columns by `__row.*`: one expression, not two calls a column.
    return events.groupBy(*group).agg(F.max_by(struct_of(others), F.col(TIE)).alias("__row")) \
        .select(*group, F.col("__row.*"))


def journal_events(spark: SparkSession, state_path: str, spec: AutoCdcSpec,
                   columns: list[str], of_keys: DataFrame | None = None,
                   plan: BatchPlan = SPARK_PLAN) -> DataFrame:
    """The journal's events (of the keys `of_keys` holds: `changes.state_of_keys`), one per
    (key, sequence), with its TIE, read as `plan` says."""
    journal = state_of_keys(spark, state_path, of_keys, spec, plan)
    return _one_per_sequence(journal.withColumn(TIE, tie_break(columns)), spec)


def apply_scd2_batch(spark: SparkSession, batch: DataFrame, spec: AutoCdcSpec,
                     target_path: str, state_path: str, write: BatchWrite, *,
                     rejected_path: str | None = None) -> CdcBatchStats:
    """Apply one micro-batch; `write` says which (and its query), for the commit markers."""
    columns = data_columns(spec, batch.columns)
    with write.step("plan"):
        plan = batch_plan(batch, spec, state_path)
        fresh, journal, tagged, observed, counts = _plan_fresh(spark, plan.read(batch), spec,
                                                               state_path, plan)
    with write.step("changes"):
        # One job: the new events, kept (engine/materialize.py: appending them is then not a
        # read of the journal they were checked against), counted on the way.
        # Kept rows do not say how they were partitioned: read into one task again.
        fresh = plan.read(computed_once(fresh))
    counted = observed_counts(observed)
    total, rejected = counted.total, counted.rejected
    if rejected:
        with write.step("rejected rows"):
            commits.record_rejected(tagged, batch.columns, spec, rejected_path, write)
    applied, deletes = int(counts.get["applied"]), int(counts.get["deletes"])
    committed = applied > 0 and _apply(
        spark, spec, write, plan, fresh, counts.get["keys"], journal, columns,
        tracked_columns(spec, batch.columns), target_columns(spec, batch.columns), target_path,
        state_path)
    stale = total - rejected - applied
    if not committed:  # nothing new, or an earlier attempt of this batch wrote the target
        applied = deletes = 0
    return CdcBatchStats(rejected=rejected, upserts=applied - deletes, deletes=deletes,
                         stale=stale)


def _plan_fresh(spark: SparkSession, batch: DataFrame, spec: AutoCdcSpec, state_path: str,
                plan: BatchPlan
                ) -> tuple[DataFrame, DataFrame, DataFrame, Observation, Observation]:
    """The batch's events the journal does not have yet (one per key and sequence), the
    journal, the tagged batch, and the observations that count them when computed."""
    columns = data_columns(spec, batch.columns)
    tagged = tag_events(batch, spec)
    observed = Observation()
    good = batch_counts_observed(tagged, observed).where(F.col(REJECT_REASON) == "") \
        .selectExpr(*map(identifier, (*spec.keys, SEQUENCE, IS_DELETE, *columns))) \
        .withColumn(TIE, tie_break(columns))
    journal = journal_events(spark, state_path, spec, columns, of_keys=batch, plan=plan)
    journaled = plan.join_side(journal.select(*map(column, spec.keys), SEQUENCE,
                                              F.col(TIE).alias("__journal_tie")))
    counts = Observation()
    fresh = _one_per_sequence(good, spec).join(journaled, [*spec.keys, SEQUENCE], "left") \
        .where(F.col("__journal_tie").isNull() | (F.col(TIE) > F.col("__journal_tie"))) \
        .drop("__journal_tie")
    fresh = fresh.observe(counts, F.count(F.lit(1)).alias("applied"),
                          F.count_if(F.col(IS_DELETE)).alias("deletes"),
                          distinct_keys(fresh, spec).alias("keys"))
    return fresh, journal, tagged, observed, counts


def _apply(spark: SparkSession, spec: AutoCdcSpec, write: BatchWrite, plan: BatchPlan,
           fresh: DataFrame, fresh_keys: list[list[str]], journal: DataFrame, columns: list[str],
           tracked: list[str], order: list[str], target_path: str, state_path: str) -> bool:
    """Rewrite the versions of the keys `fresh` touches (`fresh_keys`: their text, observed as
    `fresh` was computed); whether the target write committed."""
    affected = fresh.select(*map(column, spec.keys)).distinct()
    # An event that won a tie against a journal event replaces it: same (key, sequence).
    kept = rows_of_keys(journal.drop(TIE), affected, spec, plan) \
        .join(plan.join_side(fresh.select(*map(column, spec.keys), SEQUENCE)),
              [*spec.keys, SEQUENCE], "left_anti")
    history = plan.read(kept.unionByName(fresh.drop(TIE)))  # a union's partitions are its inputs'
    written = versions_of(history, spec, columns, tracked, order)  # order, START_AT, END_AT
    if delta_log.row_count(target_path) == 0:
        # Nothing to replace in an empty target (its log says no rows): an append of the
        # versions, one write job (scd1.py's `_apply`).
        with write.step("target append"):
            committed = commits.append_once(written, target_path, spec, "target", write)
    else:
        # Every version of the keys is in `versions` (replayed from the journal), so they
        # replace the target's rows of those keys in one commit: Delta rewrites the files that
        # hold them, and the versions are computed once, as they are written. A MERGE needed
        # them computed first, then joined them with the target twice (BENCHMARKS.md, "Issue
        # 58").
        with write.step("target replace"):
            committed = commits.replace_once(written, target_path,
                                             keys_predicate(fresh, spec, fresh_keys), spec,
                                             "target", write)
    with write.step("journal append"):
        commits.append_once(fresh.drop(TIE), state_path, spec, "state", write)
    return committed


def apply_batch(spark: SparkSession, batch: DataFrame, spec: AutoCdcSpec,
                tables: AutoCdcTables, write: BatchWrite) -> CdcBatchStats:
    """`apply_scd2_batch` on the flow's own tables."""
    return apply_scd2_batch(spark, batch, spec, tables.target, tables.state, write,
                            rejected_path=tables.rejected)
