"""Executes one flow on classic Spark + Delta: streaming append, materialized view, AUTO CDC.

Streaming flows run with `trigger(availableNow=True)`: everything available, then stop, and the
checkpoint remembers where they stopped, so the next update only processes new records.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from exactly_once.errors import FlowError
from exactly_once.local.auto_cdc.changes import CdcBatchStats
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.auto_cdc.writer import scd_type_of
from exactly_once.local.failures import flow_failure
from exactly_once.local.progress import FlowResult, Progress
from exactly_once.local.warehouse import Warehouse, delta_version, rows_written


def _flow_error(flow: str, err: BaseException) -> FlowError:
    """One line saying what stopped the flow and what to do (failures.py)."""
    return flow_failure(flow, err)


def _await(query: StreamingQuery, result: FlowResult, progress: Progress) -> None:
    """Wait for an availableNow query, reporting each micro-batch as it completes."""
    seen = -1

    def report() -> None:
        nonlocal seen
        for p in query.recentProgress:
            p = json.loads(p.json)
            if p["batchId"] > seen:
                seen = p["batchId"]
                result.add_streaming_progress(p)
                if p.get("numInputRows"):
                    progress.batch(result.flow, p["batchId"], p["numInputRows"])

    try:
        # pyspark takes seconds as int or float (it waits int(timeout * 1000) ms); its stub
        # declares int only.
        while not query.awaitTermination(0.5):  # type: ignore[arg-type]
            report()
    except Exception as err:  # StreamingQueryException: keep the cause, name the flow
        raise _flow_error(result.flow, err) from err
    report()


def run_append_flow(spark: SparkSession, flow_name: str, target: str, df: DataFrame,
                    warehouse: Warehouse, progress: Progress) -> FlowResult:
    if not df.isStreaming:
        raise FlowError(f"flow `{flow_name}` writes to streaming table `{target}` but its query "
                        "is not a stream; read with spark.readStream or declare a "
                        "materialized view")
    result = FlowResult(flow=flow_name, target=target, kind="append")
    started = time.monotonic()
    if not warehouse.has_table(target):
        warehouse.create_table(spark, target, df.schema)
    version_before = delta_version(warehouse.table_path(target))
    query = (
        df.writeStream.format("delta")
        .queryName(flow_name)
        .outputMode("append")
        .option("checkpointLocation", str(warehouse.checkpoint_path(flow_name)))
        .trigger(availableNow=True)
        .start(str(warehouse.table_path(target).resolve()))
    )
    _await(query, result, progress)
    # The Delta sink reports no output count to streaming progress; its commits do.
    result.output_rows = rows_written(warehouse.table_path(target), version_before)
    result.seconds = time.monotonic() - started
    return result


def run_materialized_view(spark: SparkSession, flow_name: str, target: str, df: DataFrame,
                          warehouse: Warehouse, progress: Progress) -> FlowResult:
    """Recompute the whole view and replace the table's contents in one Delta commit."""
    result = FlowResult(flow=flow_name, target=target, kind="materialized_view")
    started = time.monotonic()
    version_before = delta_version(warehouse.table_path(target))
    try:
        df.write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
            .save(str(warehouse.table_path(target).resolve()))
    except Exception as err:  # nothing was committed: the table keeps its previous version
        raise _flow_error(flow_name, err) from err
    warehouse.register(spark, target)
    result.output_rows = rows_written(warehouse.table_path(target), version_before)
    result.batches = 1
    result.seconds = time.monotonic() - started
    return result


def checkpoint_query_id(checkpoint: Path) -> str:
    """The id Structured Streaming gave the query of this checkpoint (its `metadata` file):
    the same across restarts, new when the checkpoint is new."""
    return json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]


def run_auto_cdc_flow(spark: SparkSession, spec: AutoCdcSpec, source: DataFrame,
                      warehouse: Warehouse, progress: Progress) -> FlowResult:
    """Apply `source`'s changes to `spec.target` batch by batch (auto_cdc/); the target is
    created with the table properties the graph gave the spec."""
    if not source.isStreaming:
        raise FlowError(f"AUTO CDC flow `{spec.name}` needs a streaming source; "
                        f"`{spec.source}` is not one")
    result = FlowResult(flow=spec.name, target=spec.target, kind="auto_cdc")
    started = time.monotonic()
    scd = scd_type_of(spec)
    tables = warehouse.auto_cdc_tables(spec.target)
    if not warehouse.has_table(spec.target):
        warehouse.create_table(spark, spec.target, scd.target_schema(spec, source),
                               properties=dict(spec.target_properties))
    scd.ensure_state_table(spark, spec, source, tables.state)
    checkpoint = warehouse.checkpoint_path(spec.name)
    applied: list[CdcBatchStats] = []

    def apply(batch: DataFrame, batch_id: int) -> None:
        query_id = checkpoint_query_id(checkpoint)  # written before the first batch runs
        # The query's own session: the idempotent-write markers are session settings, and flows
        # run concurrently (update.py).
        applied.append(scd.apply_batch(batch.sparkSession, batch, batch_id, spec, tables,
                                       query_id=query_id))

    query = (
        source.writeStream.queryName(spec.name)
        .foreachBatch(apply)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    _await(query, result, progress)
    totals = sum(applied, CdcBatchStats())
    result.output_rows = totals.upserts + totals.deletes
    result.cdc_rejected, result.cdc_stale = totals.rejected, totals.stale
    result.seconds = time.monotonic() - started
    return result
