"""Executes one flow on classic Spark + Delta: streaming append, materialized view, AUTO CDC,
AUTO CDC FROM SNAPSHOT.

Streaming flows run with `trigger(availableNow=True)` through `foreachBatch` (streams.py):
everything available, then stop, and the checkpoint remembers where they stopped, so the next
update only processes new records. Each micro-batch's writes are idempotent (idempotent.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import FlowError
from exactly_once.local.auto_cdc.changes import CdcBatchStats, check_columns, schema_may_differ
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.from_snapshot.flow import run_snapshots
from exactly_once.local.auto_cdc.from_snapshot.spec import NextSnapshot, SnapshotCdcSpec
from exactly_once.local.auto_cdc.from_snapshot.versions import AppliedSnapshot
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.auto_cdc.writer import scd_type_of
from exactly_once.local.execution.streams import flow_error, run_available_now
from exactly_once.local.observe.progress import FlowResult, Progress
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage import delta_log, idempotent, schema_evolution
from exactly_once.local.storage.delta_log import Marker
from exactly_once.local.storage.snapshot_files import compact_when_many_files
from exactly_once.local.storage.warehouse import Warehouse, as_written


def run_append_flow(spark: SparkSession, flow_name: str, target: str, df: DataFrame,
                    warehouse: Warehouse, progress: Progress, timeline: Timeline) -> FlowResult:
    if not df.isStreaming:
        raise FlowError(f"flow `{flow_name}` writes to streaming table `{target}` but its query "
                        "is not a stream; read with spark.readStream or declare a "
                        "materialized view")
    result = FlowResult(flow=flow_name, target=target, kind="append")
    path = warehouse.table_path(target).resolve()
    if not warehouse.has_table(target):
        with timeline.span(flow_name, "create table"):
            # Nullable, as a first write stores it: another flow into the table leaves this
            # one's columns NULL.
            warehouse.create_table(spark, target, as_written(df.schema))
    else:
        with timeline.span(flow_name, "evolve schema"):
            # Columns the query writes and the table lacks are added, wider types widened; a
            # column another flow of the table writes is no concern of this one.
            result.schema_changes = schema_evolution.evolve(spark, str(path), df.schema)
        progress.schema_changed(flow_name, target, result.schema_changes)
    version_before = delta_log.latest_version(path)

    def append(batch: DataFrame, batch_id: int, query_id: str, replayed: bool) -> None:
        with timeline.span(flow_name, "delta append", batch_id, target):
            idempotent.append(batch, path, Marker(f"{query_id}:{flow_name}", batch_id),
                              replayed)

    with timeline.span(flow_name, "flow"):
        run_available_now(df, flow_name, warehouse.checkpoint_path(flow_name), append, result,
                          progress, timeline)
    # The commits record what they wrote (operationMetrics): counting costs no Spark job.
    result.output_rows = delta_log.rows_written(path, version_before)
    return result


def run_materialized_view(spark: SparkSession, flow_name: str, target: str, df: DataFrame,
                          warehouse: Warehouse, progress: Progress,
                          timeline: Timeline) -> FlowResult:
    """Recompute the whole view and replace the table's contents in one Delta commit."""
    result = FlowResult(flow=flow_name, target=target, kind="materialized_view")
    path = warehouse.table_path(target).resolve()
    version_before = delta_log.latest_version(path)
    with timeline.span(flow_name, "flow"), timeline.span(flow_name, "delta overwrite", 0, target), \
            jobs_described(spark, flow_name):
        try:
            df.write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
                .save(str(path))
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
    if not source.isStreaming:
        raise FlowError(f"AUTO CDC flow `{spec.name}` needs a streaming source; "
                        f"`{spec.source}` is not one")
    check_columns(spec, source.columns)  # before anything is written, as dry-run checks them
    result = FlowResult(flow=spec.name, target=spec.target, kind="auto_cdc")
    scd = scd_type_of(spec)
    tables = warehouse.auto_cdc_tables(spec.target)
    with timeline.span(spec.name, "create tables"):
        if not warehouse.has_table(spec.target):
            warehouse.create_table(spark, spec.target, scd.target_schema(spec, source),
                                   properties=dict(spec.target_properties))
            scd.ensure_state_table(spark, spec, source, tables.state)
        else:
            evolve = schema_may_differ(spec, source, tables.target)
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
    totals = sum(applied, CdcBatchStats())
    result.output_rows = totals.upserts + totals.deletes
    result.cdc_rejected, result.cdc_stale = totals.rejected, totals.stale
    return result


def run_snapshot_cdc_flow(spark: SparkSession, spec: SnapshotCdcSpec, next_snapshot: NextSnapshot,
                          warehouse: Warehouse, progress: Progress,
                          timeline: Timeline) -> FlowResult:
    """Apply the snapshots `next_snapshot` gives after the last one applied (auto_cdc/
    from_snapshot/flow.py), each a batch of the flow; rows out are the keys they changed."""
    result = FlowResult(flow=spec.name, target=spec.target, kind="auto_cdc_from_snapshot")

    def applied(snapshot: AppliedSnapshot) -> None:
        result.snapshots.append(snapshot)
        progress.snapshot(spec.name, snapshot)

    def step(name: str, ordinal: int) -> AbstractContextManager[None]:
        return timeline.span(spec.name, name, ordinal)

    with timeline.span(spec.name, "flow"), jobs_described(spark, spec.name):
        run_snapshots(spark, spec, next_snapshot, warehouse, applied, step)
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
