"""Executes a flow into a sink (`dp.create_sink`): its rows leave the pipeline, exactly once across
updates and crashes, as a streaming table's arrive; into a `dp.foreach_batch_sink`, each
micro-batch is given to its function, at least once (what the function writes is its own).

A sink flow is an append flow: a stream through `foreachBatch` (streams.py), or a once flow's
batch. Structured Streaming runs the batch a crash interrupted again (`checkpoints.replayed_batch`);
only that batch looks for what it already wrote:

* delta, by `path` or `tableName`: each batch is one Delta commit carrying its marker
  (storage/idempotent.py), the marker a replay finds in the sink's log. A sink by `tableName`
  keeps its table in `<warehouse>/_sinks/<tableName>/` and is registered under that name in the
  session's catalog (a `<catalog>.<schema>.<table>` name of another catalog than the session's
  own, `spark_catalog`, is not: the local session has no other);
* kafka: each batch is one Kafka transaction, with a marker committed in it
  (kafka/sink_transactions.py), the marker a replay reads back.

A sink is never cleared: a full refresh of the whole pipeline reads the sink flows' sources
again (refresh.py), and what they read is appended, as Databricks' note says.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.pipelines.flow import Flow
from pyspark.pipelines.output import Sink
from pyspark.sql import DataFrame, Row, SparkSession

from exactly_once.errors import FlowError, GraphError
from exactly_once.kafka.sink_transactions import Record, TransactionalBatches, topic_exists
from exactly_once.local.execution.flows import (
    jobs_described,
    once_marker,
    once_query_id,
    record_once,
)
from exactly_once.local.execution.streams import flow_error, run_available_now
from exactly_once.local.graph.flow_declarations import (
    DELTA,
    ForEachBatchSink,
    check_appended_stream,
    check_flow_query,
    delta_sink_path,
    delta_writer_options,
    is_once,
    kafka_client_settings,
)
from exactly_once.local.observe.progress import FlowResult, Progress
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage import delta_log, idempotent
from exactly_once.local.storage.delta_log import Marker
from exactly_once.local.storage.warehouse import Warehouse

SESSION_CATALOG = "spark_catalog"
KAFKA_COLUMNS = ("value", "key", "headers", "partition")


def run_sink_flow(spark: SparkSession, flow: Flow, sink: Sink, df: DataFrame,
                  warehouse: Warehouse, progress: Progress, timeline: Timeline) -> FlowResult:
    check_flow_query(flow, df, sink)
    check_appended_stream(flow.name, sink.name, df)
    result = FlowResult(flow=flow.name, target=sink.name,
                        kind="append_once" if is_once(flow) else "sink")
    if sink.format == DELTA:
        _run_delta(spark, flow, sink, df, warehouse, progress, timeline, result)
    elif isinstance(sink, ForEachBatchSink):
        _run_foreach_batch(flow, sink, df, warehouse, progress, timeline, result)
    else:
        _run_kafka(flow, sink, df, warehouse, progress, timeline, result)
    if is_once(flow):
        record_once(warehouse, flow.name)
        result.batches = 1
    return result


# -- delta ---------------------------------------------------------------------------------------
def _run_delta(spark: SparkSession, flow: Flow, sink: Sink, df: DataFrame, warehouse: Warehouse,
               progress: Progress, timeline: Timeline, result: FlowResult) -> None:
    table_name = sink.options.get("tableName")
    path = delta_sink_path(sink) or str(warehouse.sink_table_path(str(table_name)).resolve())
    options = delta_writer_options(sink)
    version_before = delta_log.latest_version(path)

    def append(batch: DataFrame, marker: Marker, replayed: bool) -> None:
        with timeline.span(flow.name, "delta append", marker.batch, sink.name):
            idempotent.append(batch, path, marker, replayed, options)

    with timeline.span(flow.name, "flow"):
        if is_once(flow):
            with jobs_described(spark, flow.name):
                try:  # always as a replay: a run cut short after the commit left its mark
                    append(df, once_marker(once_query_id(warehouse, flow.name), flow.name),
                           replayed=True)
                except Exception as err:
                    raise flow_error(flow.name, err) from err
        else:
            run_available_now(
                df, flow.name, warehouse.checkpoint_path(flow.name),
                lambda batch, batch_id, query_id, replayed: append(
                    batch, Marker(f"{query_id}:{flow.name}", batch_id), replayed),
                result, progress, timeline)
    result.output_rows = delta_log.rows_written(path, version_before)
    if table_name is not None and delta_log.is_delta_table(path):
        with timeline.span(flow.name, "register sink table"):
            _register(spark, sink.name, table_name, path)


def _register(spark: SparkSession, sink: str, table_name: str, location: str) -> None:
    """`table_name` in the session's catalog, at the sink's table (the catalog forgets tables
    between sessions). An entry of that name from another warehouse is moved here: an external
    table's entry is dropped, never its files."""
    parts = table_name.split(".")
    if len(parts) == 3 and parts[0] != SESSION_CATALOG:
        return
    schema, table = parts[-2:]
    name = f"`{schema}`.`{table}`"
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS `{schema}`")
    if spark.catalog.tableExists(f"{schema}.{table}"):
        kind = spark.catalog.getTable(f"{schema}.{table}").tableType
        if kind != "EXTERNAL":
            raise GraphError(f"the session catalog has a {kind.lower()} table `{table_name}` of "
                             f"its own; sink `{sink}` cannot be registered over it")
        spark.sql(f"DROP TABLE {name}")
    spark.sql(f"CREATE TABLE {name} USING DELTA LOCATION '{location}'")


# -- foreach_batch_sink --------------------------------------------------------------------------
def _run_foreach_batch(flow: Flow, sink: ForEachBatchSink, df: DataFrame, warehouse: Warehouse,
                       progress: Progress, timeline: Timeline, result: FlowResult) -> None:
    """Each micro-batch to the sink's function with its id, under the flow's checkpoint: a
    batch a failure interrupted is given again with the same id (at-least-once, as
    Structured Streaming's foreachBatch; the function deduplicates by id)."""
    def call(batch: DataFrame, batch_id: int, query_id: str, replayed: bool) -> None:
        with timeline.span(flow.name, "foreach_batch_sink", batch_id, sink.name):
            sink.handler(batch, batch_id)

    with timeline.span(flow.name, "flow"):
        run_available_now(df, flow.name, warehouse.checkpoint_path(flow.name), call, result,
                          progress, timeline)


# -- kafka ---------------------------------------------------------------------------------------
def _run_kafka(flow: Flow, sink: Sink, df: DataFrame, warehouse: Warehouse, progress: Progress,
               timeline: Timeline, result: FlowResult) -> None:
    bootstrap, topic = sink.options["kafka.bootstrap.servers"], sink.options["topic"]
    settings = kafka_client_settings(sink.options)
    if not topic_exists(bootstrap, topic, settings):
        raise FlowError(f"flow `{flow.name}` failed: kafka sink `{sink.name}`: topic `{topic}` "
                        f"does not exist at {bootstrap}")
    producers: dict[str, TransactionalBatches] = {}  # writer -> its producer, made once

    def send(batch: DataFrame, batch_id: int, query_id: str, replayed: bool) -> None:
        writer = f"exactly-once-{query_id}-{flow.name}"
        if writer not in producers:  # first completes what a crashed producer left open
            producers[writer] = TransactionalBatches(bootstrap, topic, writer, settings)
        batches = producers[writer]
        with timeline.span(flow.name, "kafka transaction", batch_id, sink.name):
            if replayed and batches.already_sent(batch_id):
                return
            result.output_rows += batches.send(batch_id, _records(batch))

    with timeline.span(flow.name, "flow"):
        if is_once(flow):
            try:  # the once flow's writer: its marker says whether it was sent
                send(df, 0, once_query_id(warehouse, flow.name), replayed=True)
            except Exception as err:
                raise flow_error(flow.name, err) from err
        else:
            run_available_now(df, flow.name, warehouse.checkpoint_path(flow.name), send, result,
                              progress, timeline)


def _records(batch: DataFrame) -> Iterator[Record]:
    """The batch's rows as Kafka records, one partition of the batch at a time."""
    columns = [c for c in KAFKA_COLUMNS if c in batch.columns]
    for row in batch.select(*columns).toLocalIterator():
        yield Record(value=_bytes(row["value"]),
                     key=_bytes(row["key"]) if "key" in columns else None,
                     headers=_headers(row["headers"]) if "headers" in columns else None,
                     partition=row["partition"] if "partition" in columns else None)


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _headers(headers: list[Row] | None) -> list[tuple[str, bytes | None]] | None:
    return None if headers is None else [(h["key"], _bytes(h["value"])) for h in headers]
