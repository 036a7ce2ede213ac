"""What SCD1 and SCD2 share about a micro-batch of change events.

Each event is tagged with its sequence, whether it deletes or truncates, and why it is rejected
(a NULL key or sequence). Events compare by (sequence, tie-break); the tie-break depends only on
the event's content, so every replay decides equal sequences the same way (docs/auto_cdc.md,
"Ties").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from exactly_once.errors import DeclarationError, FlowError
from exactly_once.local.auto_cdc import one_task
from exactly_once.local.auto_cdc.declaration import spelled_as_in
from exactly_once.local.auto_cdc.one_task import SPARK_PLAN, BatchPlan
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.engine.sql_columns import column, identifier, matched_on, struct_sql
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.schema_evolution import stored_schema
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.table_definition import sql_literal

SEQUENCE = "__sequence"
TIE = "__tie"  # breaks equal sequences: struct(deleted, content hash)
IS_DELETE = "__is_delete"
IS_TRUNCATE = "__is_truncate"
SYNTHETIC = "__from_truncate"
REJECT_REASON = "__reject_reason"
RESET = "__reset"


@dataclass(frozen=True)
class CdcBatchStats:
    """What applying one micro-batch (or, summed, a whole flow run) did."""

    rejected: int = 0  # NULL key or sequence
    upserts: int = 0
    deletes: int = 0
    stale: int = 0  # older than what the batch or the table already had
    truncates: int = 0

    def __add__(self, other: CdcBatchStats) -> CdcBatchStats:
        return CdcBatchStats(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                                for f in fields(self)})


@dataclass(frozen=True)
class BatchCounts:
    """One aggregation over a tagged batch, before anything is merged."""

    total: int
    rejected: int
    truncates: int  # accepted truncate events


def check_columns(spec: AutoCdcSpec, source_columns: list[str]) -> None:
    """The columns the declaration names, against its source's: a DeclarationError about the
    target for the first that is not there. Before the flow writes anything (`dry-run` and an
    update both ask): the source's columns are known once its query is built. `spec` is
    spelled as the source spells its columns (`source_named` first)."""
    def error(message: str) -> DeclarationError:
        return DeclarationError(message, dataset=spec.target)

    known = {c.lower() for c in source_columns}
    for arg, names in [("keys", spec.keys), ("column_list", spec.column_list),
                       ("except_column_list", spec.except_column_list),
                       ("track_history_column_list", spec.track_history_column_list),
                       ("track_history_except_column_list",
                        spec.track_history_except_column_list),
                       ("ignore_null_updates_column_list", spec.ignore_null_updates_column_list),
                       ("ignore_null_updates_except_column_list",
                        spec.ignore_null_updates_except_column_list)]:
        missing = [n for n in names or () if n.lower() not in known]
        if missing:
            raise error(f"AUTO CDC flow `{spec.name}`: {arg} names "
                        f"{', '.join(f'`{n}`' for n in missing)}, not in `{spec.source}` "
                        f"(its columns: {', '.join(source_columns)})")
    data = {c.lower() for c in data_columns(spec, source_columns)}
    for arg, names in [("track_history_column_list", spec.track_history_column_list),
                       ("ignore_null_updates_column_list", spec.ignore_null_updates_column_list)]:
        unknown = {n for n in names or () if n.lower() not in data}
        if unknown:
            raise error(f"{spec.name}: {arg} names columns that are not non-key target columns: "
                        f"{sorted(unknown)}")


def source_named(spec: AutoCdcSpec, source_columns: list[str]) -> AutoCdcSpec:
    """`spec` with the columns it names spelled as its source spells them (`spelled_as_in`)."""
    def named(names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return spelled_as_in(names, source_columns)

    return dataclasses.replace(
        spec, keys=named(spec.keys) or (), column_list=named(spec.column_list),
        except_column_list=named(spec.except_column_list),
        ignore_null_updates_column_list=named(spec.ignore_null_updates_column_list),
        ignore_null_updates_except_column_list=named(spec.ignore_null_updates_except_column_list),
        track_history_column_list=named(spec.track_history_column_list),
        track_history_except_column_list=named(spec.track_history_except_column_list))


def check_source(spec: AutoCdcSpec, source: DataFrame) -> None:
    """A change feed's source is a stream; a once flow's, a batch or a stream, read once (as
    Databricks' database replication page hydrates a table from a streaming view:
    https://docs.databricks.com/aws/en/ldp/database-replication)."""
    if not spec.once and not source.isStreaming:
        raise FlowError(f"AUTO CDC flow `{spec.name}` needs a streaming source; "
                        f"`{spec.source}` is not one")


def null_ignoring(spec: AutoCdcSpec, columns: list[str]) -> list[str]:
    """Of the target's non-key `columns`, those whose NULLs in an update keep the value they had:
    every one (`ignore_null_updates`), those listed, or all but those listed; none by default.
    Names match as Spark resolves them, case-insensitively."""
    if spec.ignore_null_updates:
        return list(columns)
    if spec.ignore_null_updates_column_list is not None:
        listed = {c.lower() for c in spec.ignore_null_updates_column_list}
        return [c for c in columns if c.lower() in listed]
    if spec.ignore_null_updates_except_column_list is not None:
        excepted = {c.lower() for c in spec.ignore_null_updates_except_column_list}
        return [c for c in columns if c.lower() not in excepted]
    return []


def target_columns(spec: AutoCdcSpec, source_columns: list[str]) -> list[str]:
    """The target's columns, in order (the names were checked: `check_columns`)."""
    if spec.column_list is not None:
        return [*(k for k in spec.keys if k not in spec.column_list), *spec.column_list]
    excluded = set(spec.except_column_list or ())
    return [c for c in source_columns if c not in excluded]


def data_columns(spec: AutoCdcSpec, source_columns: list[str]) -> list[str]:
    """The target's columns other than the keys."""
    return [c for c in target_columns(spec, source_columns) if c not in spec.keys]


def schema_may_differ(spec: AutoCdcSpec, source: DataFrame, path: str) -> bool:
    """Whether a column of `source` that reaches the target is missing from the table at
    `path` (the target, or the SCD2 journal) or stored with another type: only then are the
    tables' schemas worth computing and comparing (schema_evolution.py). A source as it was
    costs a read of the table's log, no query plan."""
    stored = stored_schema(path)
    if stored is None:
        return True
    have = {f.name.lower(): f.dataType for f in stored.fields}
    reaching = {c.lower() for c in target_columns(spec, source.columns)}
    return any(have.get(f.name.lower()) != f.dataType for f in source.schema.fields
               if f.name.lower() in reaching)


def tie_break(columns: list[str]) -> Column:
    """What decides between events with equal sequences: a delete first, then the content.

    A hash of the target columns, not the Kafka offset or arrival order: a redelivery has the
    same content, so it decides nothing, and every replay decides the same way. Columns that
    are NULL are left out of it: a column the target gains later (a field added to the
    contract) is NULL in every event before it, and changes none of their decisions.
    """
    content = f"to_json({struct_sql(columns)}, map('ignoreNullFields', 'true'))"
    return F.expr(f"struct({IS_DELETE} AS deleted, sha2({content}, 256) AS content)")


def tag_events(events: DataFrame, spec: AutoCdcSpec) -> DataFrame:
    """SEQUENCE, IS_DELETE, IS_TRUNCATE and the reason ('' if none) to reject the event.

    One projection: each `withColumn` would analyze the whole plan again, which for a wide
    batch costs more than the batch itself.
    """
    def flag(condition: Column | None) -> Column:
        return F.lit(False) if condition is None else F.coalesce(condition, F.lit(False))

    truncate = flag(spec.apply_as_truncates)
    sequence_type = events.select(spec.sequence_by.alias(SEQUENCE)).schema[SEQUENCE].dataType
    null_sequence = spec.sequence_by.isNull()
    if isinstance(sequence_type, StructType):  # a struct sequence counts as NULL if any field is
        for f in sequence_type.fields:
            null_sequence = null_sequence | spec.sequence_by.getField(f.name).isNull()
    null_key = F.lit(False)
    for k in spec.keys:
        null_key = null_key | column(k).isNull()
    null_key = null_key & ~truncate  # a truncate names no key
    reason = F.concat_ws("; ", F.when(null_key, F.lit(f"null key ({', '.join(spec.keys)})")),
                         F.when(null_sequence, F.lit("null sequence")))
    return events.select("*", spec.sequence_by.alias(SEQUENCE), truncate.alias(IS_TRUNCATE),
                         (flag(spec.apply_as_deletes) & ~truncate).alias(IS_DELETE),
                         F.lit(False).alias(SYNTHETIC), reason.alias(REJECT_REASON))


def batch_counts_observed(events: DataFrame, observation: Observation) -> DataFrame:
    """`events` (tagged), counted by `observation` in the pass that first reads them: the batch's
    counts cost no job of their own."""
    rejected = f"{REJECT_REASON} != ''"
    return events.observe(observation, F.expr("count(1) AS total"),
                          F.expr(f"count_if({rejected}) AS rejected"),
                          F.expr(f"count_if(NOT ({rejected}) AND {IS_TRUNCATE}) AS truncates"))


def observed_counts(observation: Observation) -> BatchCounts:
    """The counts of `batch_counts_observed`, once a query that read the events has run."""
    values = observation.get
    return BatchCounts(total=int(values["total"]), rejected=int(values["rejected"]),
                       truncates=int(values["truncates"]))


def fill_null_updates(events: DataFrame, spec: AutoCdcSpec, columns: list[str]) -> DataFrame:
    """NULL columns take the key's previous value in the batch since its last delete.

    RESET marks events that follow a delete of the same batch: they replace the row entirely
    instead of keeping the target's values where they are NULL.
    """
    order = [SEQUENCE, TIE] if TIE in events.columns else [SEQUENCE]
    so_far = Window.partitionBy(*map(column, spec.keys)).orderBy(*order) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    events = events.withColumn("__life", F.sum(F.col(IS_DELETE).cast("int")).over(so_far))
    in_life = Window.partitionBy(*map(column, spec.keys), "__life").orderBy(*order) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    filled = [F.last(F.when(~F.col(IS_DELETE), column(c)), ignorenulls=True)
              .over(in_life).alias(c)
              if c in columns else column(c) for c in events.columns]
    return events.select(*filled).withColumn(RESET, F.col("__life") > 0).drop("__life")


def rows_of_keys(rows: DataFrame, keys: DataFrame, spec: AutoCdcSpec,
                 plan: BatchPlan = SPARK_PLAN) -> DataFrame:
    """The rows of `rows` whose keys are among those of `keys`, kept as they are read: a
    broadcast semi-join. The keys are few, at most a batch's, and a batch has no size estimate,
    so without the hint the planner would shuffle `rows` to join them. In a batch planned as
    one task (one_task.py) the join is the task's own."""
    batch_keys = keys.select(*map(column, spec.keys))
    side = plan.join_side(batch_keys) if plan.one_task else F.broadcast(batch_keys)
    return rows.join(side, list(spec.keys), "left_semi")


# A state table of more rows than this is read for a batch's keys only (`state_of_keys`).
KEYED_STATE_READ_MIN_ROWS = 10_000


def reads_whole_state(path: str) -> bool:
    """Whether a batch reads the state table at `path` whole: its log counts no more than
    KEYED_STATE_READ_MIN_ROWS rows (None: the log cannot tell, so it may be large)."""
    rows = delta_log.row_count(path)
    return rows is not None and rows <= KEYED_STATE_READ_MIN_ROWS


def batch_plan(batch: DataFrame, spec: AutoCdcSpec, state_path: str) -> BatchPlan:
    """How the batch is planned: in one task when it is small and its state too, which is
    then read whole (`one_task.plan_for`); Spark's plan otherwise. A keyed read's semi-join
    above the state's one partition would be pushed below it by the optimizer, and its
    partitions would then need a shuffle. A flow that reads its source once, as a batch
    (`once`), keeps Spark's plan too: its size would be a batch read's, which Delta answers by
    rebuilding the source table's state (Spark jobs), for what is a whole table."""
    if spec.once or not reads_whole_state(state_path):
        return SPARK_PLAN
    return one_task.plan_for(batch, state_path)


def state_of_keys(spark: SparkSession, path: str, keys: DataFrame | None,
                  spec: AutoCdcSpec, plan: BatchPlan = SPARK_PLAN) -> DataFrame:
    """The state table at `path` (its latest version, `read_latest`), as `plan` reads it; once
    it holds more than KEYED_STATE_READ_MIN_ROWS rows (its log's count), only the rows of the
    keys `keys` holds.

    A state table holds every key the flow ever applied and a batch needs only its own keys'
    rows: dropped as they are read, before any aggregation, the batch's shuffles and hashing
    follow the batch, not the state's size. Below the limit the whole state measured no slower
    than the Spark job that broadcasts the batch's keys; the rows are the same either way
    (BENCHMARKS.md, "A batch's work follows its keys").
    """
    state = read_latest(spark, path)
    # A batch planned as one task reads its state whole (`batch_plan` asked the log already).
    if keys is None or plan.one_task or reads_whole_state(path):
        return plan.read(state)
    return rows_of_keys(state, keys, spec)


# Key types whose values a CAST from their string form gives back exactly, so `keys_predicate`
# names them as typed literals (which Delta's file statistics can skip on).
_CAST_FROM_STRING = (StringType, ByteType, ShortType, IntegerType, LongType, DecimalType,
                     DateType, BooleanType)


def distinct_keys(rows: DataFrame, spec: AutoCdcSpec) -> Column:
    """The distinct keys of `rows` as `keys_predicate` reads them, an aggregate: each key's
    values as text, or the keys as JSON for a type without an exact text form. Observed on the
    pass that computes the rows (`DataFrame.observe`), they cost no Spark job of their own."""
    if _typed_literals(_key_types(rows, spec)):
        values = ", ".join(f"CAST({identifier(k)} AS STRING)" for k in spec.keys)
    else:
        values = _keys_as_json(spec)
    return F.expr(f"collect_set(array({values}))")


def keys_predicate(rows: DataFrame, spec: AutoCdcSpec, found: list[list[str]]) -> str:
    """A SQL predicate over the target's columns: the row's keys are among `found`, the keys of
    `rows` (`distinct_keys`). Keys of a type that has no exact string form (a timestamp, a
    double, a struct...) compare as `to_json` of the keys, which both sides compute in the same
    session."""
    keys = [identifier(k) for k in spec.keys]
    types = _key_types(rows, spec)
    if _typed_literals(types):
        tuples = sorted({tuple(f"CAST({sql_literal(v)} AS {t.simpleString()})"
                               for v, t in zip(row, types, strict=True)) for row in found})
        if len(keys) == 1:
            return f"{keys[0]} IN ({', '.join(t[0] for t in tuples)})"
        return f"({', '.join(keys)}) IN ({', '.join('(' + ', '.join(t) + ')' for t in tuples)})"
    texts = {str(row[0]) for row in found}
    return f"{_keys_as_json(spec)} IN ({', '.join(sorted(sql_literal(t) for t in texts))})"


def _key_types(rows: DataFrame, spec: AutoCdcSpec) -> list[DataType]:
    return [rows.schema[k].dataType for k in spec.keys]


def _typed_literals(types: list[DataType]) -> bool:
    return all(isinstance(t, _CAST_FROM_STRING) for t in types)


def _keys_as_json(spec: AutoCdcSpec) -> str:
    fields = ", ".join(f"{sql_literal(k)}, {identifier(k)}" for k in spec.keys)
    return f"to_json(named_struct({fields}))"


def merge_condition(spec: AutoCdcSpec, extra: tuple[str, ...] = ()) -> str:
    """The MERGE's match: the keys (and `extra` columns) of target `t` equal those of source `s`."""
    return matched_on((*spec.keys, *extra))
