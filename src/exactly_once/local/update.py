"""One pipeline update: every dataset brought up to date, upstream before downstream.

Order comes from the reads themselves: when a flow's query reads a dataset of the pipeline, that
dataset is updated first (see `reads.py`), so each flow sees its inputs complete for this update.
Temporary views are not stored; a read of one returns its query. A refresh selection
(`refresh.py`) limits the update to some tables: the others are read as they are.
"""

from __future__ import annotations

import time

from pyspark.pipelines.flow import Flow
from pyspark.sql import DataFrame, SparkSession

from exactly_once.local import event_log, flows
from exactly_once.local.auto_cdc_spec import AutoCdcSpec
from exactly_once.local.expectations import ObservedExpectations, apply_expectations, declared
from exactly_once.local.progress import FlowResult, Progress, UpdateResult
from exactly_once.local.reads import resolved_reads
from exactly_once.local.refresh import RefreshSelection, plan_refresh
from exactly_once.local.registry import GraphError, PipelineGraph
from exactly_once.local.warehouse import Warehouse


class PipelineUpdate:
    def __init__(self, spark: SparkSession, graph: PipelineGraph, warehouse: Warehouse,
                 progress: Progress | None = None):
        self.spark, self.graph, self.warehouse = spark, graph, warehouse
        self.progress = progress or Progress(quiet=True)
        self._updated: set[str] = set()
        self._updating: list[str] = []
        self.result = UpdateResult()
        self.update_id = event_log.new_update_id()
        # Expectations of temporary views read by the flow being set up (a stack: flow functions
        # may update upstream datasets, and so run other flows, while they build their query).
        self._observed: list[ObservedExpectations] = []

    def run(self, selection: RefreshSelection | None = None) -> UpdateResult:
        started = time.monotonic()
        tables = [t.name for t in self.graph.tables()]
        plan = plan_refresh(self.graph, selection or RefreshSelection())
        self.warehouse.reset(self.spark, {name: [f.name for f in self.graph.flows_into(name)]
                                          for name in plan.reset})
        for name in tables:
            if self.warehouse.has_table(name):
                self.warehouse.register(self.spark, name)
        self._updated.update(set(tables) - set(plan.update))  # read as they are
        try:
            with resolved_reads(self._resolve):
                for name in plan.update:
                    self._update(name)
        finally:  # one flow_progress row per flow that ran, failed ones included
            event_log.append(self.spark, self.warehouse.root, self.result.flows, self.update_id)
        self.result.table_rows = {name: self.warehouse.row_count(self.spark, name)
                                  for name in tables}
        self.result.seconds = time.monotonic() - started
        return self.result

    def _resolve(self, name: str, streaming: bool) -> DataFrame | None:
        if name not in self.graph.outputs:
            return None  # not ours: an ordinary catalog table
        if self.graph.is_view(name):
            (view_flow,) = self.graph.flows_into(name)
            df, observed = apply_expectations(view_flow.func(), declared(view_flow.func), name)
            if observed is not None:  # counted by the flow that reads the view
                self._observed.append(observed)
            return df
        self._update(name)
        reader = self.spark.readStream if streaming else self.spark.read
        return reader.format("delta").load(str(self.warehouse.table_path(name).resolve()))

    def _update(self, name: str) -> None:
        if name in self._updated:
            return
        if name in self._updating:
            cycle = " -> ".join([*self._updating[self._updating.index(name):], name])
            raise GraphError(f"datasets read each other in a cycle: {cycle}")
        self._updating.append(name)
        for flow in self.graph.flows_into(name):
            self.result.flows.append(self._run_flow(flow))
        self._updating.pop()
        self._updated.add(name)

    def _run_flow(self, flow: Flow | AutoCdcSpec):
        kind = "auto_cdc" if isinstance(flow, AutoCdcSpec) else (
            "materialized_view" if self.graph.is_materialized_view(flow.target) else "append")
        # Expectations of views this flow reads are counted by this flow, whatever upstream
        # flows its query runs first (they collect their own, on their own stack frame).
        outer, self._observed = self._observed, []
        try:
            if isinstance(flow, AutoCdcSpec):
                df, own = self._resolve(flow.source, streaming=True), None
                if df is None:
                    raise GraphError(f"AUTO CDC flow `{flow.name}` reads `{flow.source}`, "
                                     "which the pipeline does not define")
            else:
                df = flow.func()  # may update upstream datasets first, through _resolve
                df, own = apply_expectations(df, declared(flow.func), flow.target)
            observed = [*self._observed, *([own] if own else [])]
        finally:
            self._observed = outer

        def run():
            if isinstance(flow, AutoCdcSpec):
                return flows.run_auto_cdc_flow(self.spark, flow, df, self.warehouse,
                                               self.progress,
                                               self.graph.table_properties(flow.target))
            runner = flows.run_materialized_view if kind == "materialized_view" \
                else flows.run_append_flow
            return runner(self.spark, flow.name, flow.target, df, self.warehouse, self.progress)

        self.progress.flow_started(flow.name, kind)
        try:
            result = run()
        except flows.FlowError as err:  # the event log records the failure, then it propagates
            self.result.flows.append(FlowResult(flow=flow.name, target=flow.target, kind=kind,
                                                status="FAILED", error=str(err)))
            raise
        for o in observed:  # expectation counts, from the same pass that wrote the rows
            o.collect(result.observed)
            result.expectations += o.metrics
            result.dropped_records = (result.dropped_records or 0) + o.dropped_records
        self.progress.flow_finished(result)
        return result
