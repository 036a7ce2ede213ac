"""Executes one flow on classic Spark + Delta: streaming append, once append, materialized view,
AUTO CDC, AUTO CDC FROM SNAPSHOT (sinks: sinks.py). A table is created with its declared
definition (the warehouse holds it: storage/table_definition.py), which a materialized view's
recompute keeps.

Streaming flows run with `trigger(availableNow=True)` through `foreachBatch` (streams.py):
everything available, then stop, and the checkpoint remembers where they stopped, so the next
update only processes new records. Each micro-batch's writes are idempotent (idempotent.py).

A once flow (`once=True`, a backfill) writes its batch query as one batch, marked with the flow's
once writer id (`once_query_id`, kept with its checkpoint as a streaming query's id is), then
records that it ran (`record_once`, in its checkpoint's directory): a crash between the two
leaves the mark in the target's log, and the next update finds it instead of writing again. A
full refresh of the target forgets both, and the flow runs again, as Databricks documents. A once
AUTO CDC flow over a stream (Databricks' database replication page hydrates a table that way)
runs as a streaming flow whose checkpoint keeps what it applied, and is recorded as run when the
stream has given everything it had.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from pyspark.pipelines.flow import Flow
from pyspark.sql import DataFrame, SparkSession

from exactly_once.local.auto_cdc.changes import (
    CdcBatchStats,
    check_columns,
    check_source,
    schema_may_differ,
    source_named,
)
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.from_snapshot.flow import run_snapshots
from exactly_once.local.auto_cdc.from_snapshot.spec import NextSnapshot, SnapshotCdcSpec
from exactly_once.local.auto_cdc.from_snapshot.versions import AppliedSnapshot
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.auto_cdc.writer import scd_type_of
from exactly_once.local.execution import unchanged
from exactly_once.local.execution.streams import flow_error, run_available_now
from exactly_once.local.graph.flow_declarations import (
    check_append_query,
    check_appended_stream,
    check_flow_query,
    is_once,
)
from exactly_once.local.observe.progress import FlowResult, Progress
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage import delta_log, idempotent, schema_evolution, table_definition
from exactly_once.local.storage.delta_log import Marker
from exactly_once.local.storage.files import write_atomic
from exactly_once.local.storage.schema_evolution import SchemaChange
from exactly_once.local.storage.snapshot_files import compact_when_many_files
from exactly_once.local.storage.warehouse import AutoCdcTables, Warehouse, as_written


def run_append_flow(spark: SparkSession, flow_name: str, target: str, df: DataFrame,
                    warehouse: Warehouse, progress: Progress, timeline: Timeline) -> FlowResult:
    check_append_query(flow_name, target, df)
    check_appended_stream(flow_name, target, df)
    result = FlowResult(flow=flow_name, target=target, kind="append")
    path = warehouse.table_path(target).resolve()
    result.schema_changes = _create_target(spark, flow_name, target, df, warehouse, progress,
                                           timeline)
    version_before = delta_log.latest_version(path)

    def append(batch: DataFrame, batch_id: int, query_id: str, replayed: bool) -> None:
        with timeline.span(flow_name, "delta append", batch_id, target):
            # A column the query gained (Auto Loader's addNewColumns, a contract's new field)
            # joined the table before the flow started (_create_target: schema_evolution.py).
            idempotent.append(batch, path, Marker(f"{query_id}:{flow_name}", batch_id),
                              replayed)

    with timeline.span(flow_name, "flow"):
        run_available_now(df, flow_name, warehouse.checkpoint_path(flow_name), append, result,
                          progress, timeline)
    # The commits record what they wrote (operationMetrics): counting costs no Spark job.
    result.output_rows = delta_log.rows_written(path, version_before)
    return result


def _create_target(spark: SparkSession, flow_name: str, target: str, df: DataFrame,
                   warehouse: Warehouse, progress: Progress,
                   timeline: Timeline) -> list[SchemaChange]:
    """The streaming table an append flow writes: created from its query's schema if missing,
    else evolved to it (the changes made) unless its declaration fixes its schema."""
    if not warehouse.has_table(target):
        with timeline.span(flow_name, "create table"):
            # Nullable, as a first write stores it: another flow into the table leaves this
            # one's columns NULL.
            warehouse.create_table(spark, target, as_written(df.schema))
        return []
    if warehouse.definition(target).schema is not None:
        return []  # a declared schema is the table's: the query fits it (flow_kinds.check_query)
    with timeline.span(flow_name, "evolve schema"):
        # Columns the query writes and the table lacks are added, wider types widened; a
        # column another flow of the table writes is no concern of this one.
        changes = schema_evolution.evolve(spark, str(warehouse.table_path(target).resolve()),
                                          df.schema)
    progress.schema_changed(flow_name, target, changes)
    return changes


# -- once flows --------------------------------------------------------------------------------
def once_query_id(warehouse: Warehouse, flow_name: str) -> str:
    """The writer id of a once flow's marks, in place of a streaming query's id: made on its
    first run and kept with its checkpoint, so it is new once a full refresh forgets that."""
    path = warehouse.once_query_path(flow_name)
    if not path.is_file():
        write_atomic(path, f"once-{uuid.uuid4()}")
    return path.read_text(encoding="utf-8").strip()


def once_marker(query_id: str, flow_name: str) -> Marker:
    """The mark of a once flow's one write (`Marker`, as a streaming batch's)."""
    return Marker(f"{query_id}:{flow_name}", 0)


def ran_once(warehouse: Warehouse, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> bool:
    """Whether `flow` is a once flow that has run since its target was last recreated."""
    return is_once(flow) and warehouse.once_marker_path(str(flow.name)).is_file()


def record_once(warehouse: Warehouse, flow_name: str) -> None:
    """Record that once flow `flow_name` ran, after its writes committed."""
    write_atomic(warehouse.once_marker_path(flow_name), json.dumps({"flow": flow_name}))


def run_once_flow(spark: SparkSession, flow: Flow, df: DataFrame, warehouse: Warehouse,
                  progress: Progress, timeline: Timeline) -> FlowResult:
    """A once flow into a streaming table: its batch, appended as one marked commit."""
    check_flow_query(flow, df, None)
    flow_name, target = flow.name, flow.target
    result = FlowResult(flow=flow_name, target=target, kind="append_once", batches=1)
    path = warehouse.table_path(target).resolve()
    result.schema_changes = _create_target(spark, flow_name, target, df, warehouse, progress,
                                           timeline)
    version_before = delta_log.latest_version(path)
    with timeline.span(flow_name, "flow"), timeline.span(flow_name, "delta append", 0, target), \
            jobs_described(spark, flow_name):
        try:  # `replayed`: a run cut short after the commit left its mark
            idempotent.append(df, path, once_marker(once_query_id(warehouse, flow_name),
                                                    flow_name), replayed=True)
        except Exception as err:  # nothing committed
            raise flow_error(flow_name, err) from err
    record_once(warehouse, flow_name)
    result.output_rows = delta_log.rows_written(path, version_before)
    return result


def run_materialized_view(spark: SparkSession, flow_name: str, target: str, df: DataFrame,
                          warehouse: Warehouse, progress: Progress, timeline: Timeline,
                          reads: Mapping[str, unchanged.TableRead] | None = None,
                          pipeline_definition: str | None = None) -> FlowResult:
    """Recompute the whole view and replace the table's contents in one Delta commit, keeping
    what its declaration defines of the table (table_definition.overwrite): created with it
    first, when new. `reads`: the pipeline tables the query read and their versions; when
    they, the query and the `pipeline_definition` (schema_check.fingerprint) are those of
    the table's last refresh, nothing is written and the flow is SKIPPED (unchanged.py)."""
    result = FlowResult(flow=flow_name, target=target, kind="materialized_view")
    path = warehouse.table_path(target).resolve()
    definition = warehouse.definition(target)
    if definition.layout_problem(path):  # its file changed what Delta does not change in place
        warehouse.reset(spark, {target: []})  # the table anew, as a full refresh makes it
    if not warehouse.has_table(target):
        with timeline.span(flow_name, "create table"):
            # As a write stores a schema: a query's non-nullable column is no NOT NULL.
            warehouse.create_table(spark, target, as_written(df.schema))
    how = table_definition.overwrite(path, definition, df.schema)
    stamp = None if reads is None or pipeline_definition is None \
        else unchanged.fingerprint(df, reads, pipeline_definition)
    if stamp is not None and unchanged.refreshed_with(path, stamp):
        result.status = "SKIPPED"
        return result
    version_before = delta_log.latest_version(path)
    with timeline.span(flow_name, "flow"), timeline.span(flow_name, "delta overwrite", 0, target), \
            jobs_described(spark, flow_name):
        try:
            # Into a table whose log says it holds no rows (new, or emptied), replacing is
            # adding: an append, where an overwrite rebuilds the table's state first to find
            # the files it removes (BENCHMARKS.md, "The first update").
            mode = "append" if not how.options and how.partition_by is None \
                and delta_log.row_count(path) == 0 else "overwrite"
            writer = df.write.format("delta").mode(mode).options(**how.options)
            if stamp is not None:
                writer = writer.option("userMetadata", stamp)
            if how.partition_by is not None:
                writer = writer.partitionBy(*how.partition_by)
            writer.save(str(path))
        except Exception as err:  # nothing was committed: the table keeps its previous version
            raise flow_error(flow_name, err) from err
    warehouse.register(spark, target)
    result.output_rows = delta_log.rows_written(path, version_before)
    result.batches = 1
    return result


def run_auto_cdc_flow(spark: SparkSession, spec: AutoCdcSpec, source: DataFrame,
                      warehouse: Warehouse, progress: Progress,
                      timeline: Timeline) -> FlowResult:
    """Apply `source`'s changes to `spec.target` batch by batch (auto_cdc/); the target is
    created with the table properties the graph gave the spec."""
    check_source(spec, source)
    check_appended_stream(spec.name, spec.target, source)
    spec = source_named(spec, source.columns)
    check_columns(spec, source.columns)  # before anything is written, as dry-run checks them
    result = FlowResult(flow=spec.name, target=spec.target,
                        kind="auto_cdc_once" if spec.once else "auto_cdc")
    scd = scd_type_of(spec)
    tables = warehouse.auto_cdc_tables(spec.target)
    with timeline.span(spec.name, "create tables"):
        if not warehouse.has_table(spec.target):
            warehouse.create_table(spark, spec.target, scd.target_schema(spec, source),
                                   properties=dict(spec.target_properties))
            scd.ensure_state_table(spark, spec, source, tables.state)
        else:
            # A declared schema is the target's: the source's new columns are not its.
            evolve = warehouse.definition(spec.target).schema is None \
                and schema_may_differ(spec, source, tables.target)
            # The state first: the target's schema says whether the tables still have to
            # evolve, so a crash between the two makes the next update evolve both.
            scd.ensure_state_table(spark, spec, source, tables.state, evolve=evolve)
            if evolve:
                # The target gains the source's new columns (in SCD2 untracked unless the
                # declaration lists them) and widens what the source widened, as on Databricks.
                result.schema_changes = schema_evolution.evolve(
                    spark, tables.target, as_written(scd.target_schema(spec, source)),
                    removed_allowed=False)
    progress.schema_changed(spec.name, spec.target, result.schema_changes)
    applied: list[CdcBatchStats] = []
    if spec.once and not source.isStreaming:
        with timeline.span(spec.name, "flow"), jobs_described(spark, spec.name):
            _apply_once(spark, spec, source, tables, once_query_id(warehouse, spec.name),
                        timeline, applied)
        record_once(warehouse, spec.name)
        result.batches = 1
        return _counted(result, applied)

    def apply(batch: DataFrame, batch_id: int, query_id: str, replayed: bool) -> None:
        # The query's own session: the commit markers are session settings, and flows run
        # concurrently (update.py).
        with timeline.span(spec.name, "auto cdc batch", batch_id, spec.target):
            def step(name: str) -> AbstractContextManager[None]:
                return timeline.span(spec.name, name, batch_id)

            applied.append(scd.apply_batch(batch.sparkSession, batch, spec, tables,
                                           BatchWrite(query_id, batch_id, replayed, step)))

    with timeline.span(spec.name, "flow"):
        run_available_now(source, spec.name, warehouse.checkpoint_path(spec.name), apply,
                          result, progress, timeline)
    with timeline.span(spec.name, "compact state"), jobs_described(spark, spec.name):
        # Once its batches are committed: a crash here leaves the state as they wrote it.
        compact_when_many_files(spark, tables.state)
    if spec.once:  # a once flow over a stream: what was there, applied; its checkpoint kept it
        record_once(warehouse, spec.name)
    return _counted(result, applied)


def _apply_once(spark: SparkSession, spec: AutoCdcSpec, source: DataFrame, tables: AutoCdcTables,
                query_id: str, timeline: Timeline, applied: list[CdcBatchStats]) -> None:
    """A once flow's source, applied as batch 0 of writer `query_id` (its writes marked as a
    streaming batch's). Always as a replay: a run cut short after a commit left its mark."""
    def step(name: str) -> AbstractContextManager[None]:
        return timeline.span(spec.name, name, 0)

    # A session of its own: a MERGE's commit mark is a session setting, and flows run at once.
    writer = spark.newSession()
    with timeline.span(spec.name, "auto cdc batch", 0, spec.target):
        try:
            applied.append(scd_type_of(spec).apply_batch(
                writer, source, spec, tables, BatchWrite(query_id, 0, True, step)))
        except Exception as err:
            raise flow_error(spec.name, err) from err


def _counted(result: FlowResult, applied: list[CdcBatchStats]) -> FlowResult:
    totals = sum(applied, CdcBatchStats())
    result.output_rows = totals.upserts + totals.deletes
    result.cdc_rejected, result.cdc_stale = totals.rejected, totals.stale
    return result


def run_snapshot_cdc_flow(spark: SparkSession, spec: SnapshotCdcSpec, next_snapshot: NextSnapshot,
                          warehouse: Warehouse, progress: Progress,
                          timeline: Timeline) -> FlowResult:
    """Apply the snapshots `next_snapshot` gives after the last one applied (auto_cdc/
    from_snapshot/flow.py), each a batch of the flow; rows out are the keys they changed."""
    result = FlowResult(flow=spec.name, target=spec.target, kind="auto_cdc_from_snapshot_once"
                        if spec.once else "auto_cdc_from_snapshot")

    def applied(snapshot: AppliedSnapshot) -> None:
        result.snapshots.append(snapshot)
        progress.snapshot(spec.name, snapshot)

    def step(name: str, ordinal: int) -> AbstractContextManager[None]:
        return timeline.span(spec.name, name, ordinal)

    with timeline.span(spec.name, "flow"), jobs_described(spark, spec.name):
        run_snapshots(spark, spec, next_snapshot, warehouse, applied, step)
    if spec.once:  # every snapshot applied and recorded
        record_once(warehouse, spec.name)
    result.batches = len(result.snapshots)
    result.input_rows = sum(s.rows for s in result.snapshots)
    result.output_rows = sum(s.changed for s in result.snapshots)
    return result


@contextmanager
def jobs_described(spark: SparkSession, flow_name: str) -> Iterator[None]:
    """The block's Spark jobs described by the flow's name, as a streaming query's are (the
    timeline counts them by it); a thread-local property: flows run in threads of their own."""
    context = spark.sparkContext
    described = context.getLocalProperty("spark.job.description")
    context.setJobDescription(flow_name)
    try:
        yield
    finally:
        context.setJobDescription(described)  # type: ignore[arg-type]
