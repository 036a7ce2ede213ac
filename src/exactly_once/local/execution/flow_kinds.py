"""What kind of flow a flow is, and the function that runs it (flows.py, sinks.py): decided once
its query is built, since a `@dp.table` over a batch query is a materialized view, as
Databricks' `table` reference says (open-source pipelines refuse it); then what the target's
declaration asks of that query, checked before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pyspark.pipelines.flow import Flow
from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import DeclarationError
from exactly_once.local.auto_cdc.from_snapshot.spec import NextSnapshot, SnapshotCdcSpec
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.execution import flows, sinks, unchanged
from exactly_once.local.graph.dataset_declarations import batch_table_with_flows
from exactly_once.local.graph.flow_declarations import is_once
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.observe.progress import FlowResult, Progress
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage.warehouse import Warehouse

# A flow bound to its session and target, given its query (a DataFrame; for a snapshot flow,
# its NextSnapshot), the warehouse, the progress and the timeline.
FlowRunner = Callable[[Any, Warehouse, Progress, Timeline], FlowResult]
Query = DataFrame | NextSnapshot


def runner(spark: SparkSession, graph: PipelineGraph, flow: Flow | AutoCdcSpec | SnapshotCdcSpec,
           query: Query | None, batch_reads: Mapping[str, unchanged.TableRead] | None,
           definition: str | None) -> tuple[str, FlowRunner]:
    """The flow's kind and the function that runs it in `spark` (the flow's session).
    `query`: None before it is built (a flow that failed, or ran once already); `batch_reads`:
    the tables its query read as a batch, with their versions (a materialized view is not
    recomputed when none changed: unchanged.py); `definition`: the pipeline's fingerprint."""
    once = "_once" if is_once(flow) else ""
    if isinstance(flow, SnapshotCdcSpec):
        return f"auto_cdc_from_snapshot{once}", partial(flows.run_snapshot_cdc_flow, spark, flow)
    if isinstance(flow, AutoCdcSpec):
        return f"auto_cdc{once}", partial(flows.run_auto_cdc_flow, spark, flow)
    sink = graph.sink(flow.target)
    if sink is not None:
        return "append_once" if once else "sink", partial(sinks.run_sink_flow, spark, flow, sink)
    if once:
        return "append_once", partial(flows.run_once_flow, spark, flow)
    if graph.is_materialized_view(flow.target) or is_batch_table(graph, flow, query):
        # Always recomputed when its refresh policy is `full`.
        full = getattr(graph.outputs.get(flow.target), "refresh_policy", "") == "full"
        return "materialized_view", partial(
            flows.run_materialized_view, spark, flow.name, flow.target,
            reads=None if batch_reads is None or full else batch_reads,
            pipeline_definition=definition)
    return "append", partial(flows.run_append_flow, spark, flow.name, flow.target)


def is_batch_table(graph: PipelineGraph, flow: Flow, query: Query | None) -> bool:
    """Whether `flow` is a `@dp.table`'s own query, and a batch one."""
    return (graph.decides_kind(flow) and isinstance(query, DataFrame)
            and not query.isStreaming)


def check_query(graph: PipelineGraph, warehouse: Warehouse,
                flow: Flow | AutoCdcSpec | SnapshotCdcSpec, kind: str, query: Query) -> None:
    """What the target's declaration asks of the flow, checked before it writes: a
    materialized view `@dp.table` made is its flow's alone; a query fits the table's declared
    schema; a stored table has the layout declared (only a full refresh changes a streaming
    table's)."""
    target = flow.target
    if kind == "materialized_view" and graph.query_decides_kind(target):
        others = [f.name for f in graph.flows_into(target) if f.name != flow.name]
        if others:
            raise batch_table_with_flows(target, others)
    definition = warehouse.definition(target)
    if kind in ("append", "append_once", "materialized_view") and isinstance(query, DataFrame):
        problem = definition.fit_problem(query.schema)
        if problem:
            raise DeclarationError(problem, dataset=target)
    if kind != "materialized_view" and warehouse.has_table(target):
        problem = definition.layout_problem(warehouse.table_path(target))
        if problem:
            raise DeclarationError(f"{problem}; a full refresh of `{target}` "
                                   f"(--full-refresh {target}) recreates it", dataset=target)
