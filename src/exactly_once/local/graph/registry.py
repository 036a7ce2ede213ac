"""Collects the graph that pipeline files declare, through pyspark's own registration hook, and
checks it: every problem a declaration can have without reading data is a DeclarationError
naming the file and the dataset, raised while the files load (`complete`).

Each table's declared definition (comment, properties, partitioning, clustering, schema, `path`,
`private`: dataset_declarations.py) is read from here as the warehouse takes it
(`definitions`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from pyspark.pipelines.flow import AutoCdcFlow, Flow
from pyspark.pipelines.graph_element_registry import GraphElementRegistry
from pyspark.pipelines.output import (
    MaterializedView,
    Output,
    Sink,
    StreamingTable,
    Table,
    TemporaryView,
)
from pyspark.sql.types import StructType

from exactly_once import table_properties
from exactly_once.errors import DeclarationError, GraphError
from exactly_once.local.auto_cdc.from_snapshot.spec import SnapshotCdcSpec
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.catalog.names import Namespace, NameSyntaxError, split
from exactly_once.local.graph import expectations
from exactly_once.local.graph.dataset_declarations import DeclaredStreamingTable, PublishedView
from exactly_once.local.graph.event_hooks import EventHook
from exactly_once.local.storage.table_definition import TableDefinition
from exactly_once.table_properties import (
    TOMBSTONE_GC_NEVER_SECONDS,
    TOMBSTONE_GC_THRESHOLD,
    tombstone_gc_seconds,
)

AnyFlow = TypeVar("AnyFlow", Flow, AutoCdcSpec, SnapshotCdcSpec)


@dataclass
class PipelineGraph(GraphElementRegistry):
    outputs: dict[str, Output] = field(default_factory=dict)
    flows: list[Flow] = field(default_factory=list)
    auto_cdc_flows: list[AutoCdcSpec] = field(default_factory=list)
    snapshot_flows: list[SnapshotCdcSpec] = field(default_factory=list)
    # The pipeline file that declared each dataset and flow, by name (the first to declare the
    # name); `loading` is the file running now, as messages show it (loader.py).
    declared_in: dict[str, str] = field(default_factory=dict)
    loading: str | None = None
    # `@dp.on_event_hook`s, in declaration order: not part of the dataflow (event_hooks.py).
    event_hooks: list[EventHook] = field(default_factory=list)
    # The pipeline's catalog and schema: a dataset, a flow's target or an AUTO CDC source
    # named in two or three parts that name them is the dataset of the last part, and one
    # named in another schema or catalog is published there, as on Databricks
    # (https://docs.databricks.com/aws/en/ldp/target-schema; names.py).
    namespace: Namespace = field(default_factory=Namespace)

    def register_output(self, output: Output) -> None:
        if not isinstance(output, Sink):
            output = replace(output, name=self._dataset_name(
                output.name, published_view=isinstance(output, PublishedView)))
        if output.name in self.outputs:
            raise GraphError(f"dataset `{output.name}` is defined twice", dataset=output.name,
                             file=self.loading)
        self.outputs[output.name] = output
        self._declared(output.name)

    def register_event_hook(self, hook: EventHook) -> None:
        if any(h.name == hook.name for h in self.event_hooks):
            raise GraphError(f"event hook `{hook.name}` is defined twice", dataset=hook.name,
                             file=self.loading)
        self.event_hooks.append(hook)

    def register_flow(self, flow: Flow) -> None:
        flow = self._in_namespace(flow)
        if any(f.name == flow.name for f in self.flows):
            raise GraphError(f"flow `{flow.name}` is defined twice", dataset=flow.target,
                             file=self.loading)
        self.flows.append(flow)
        self._declared(flow.name)

    def register_auto_cdc_flow(self, flow: AutoCdcFlow) -> None:
        """pyspark's own AUTO CDC flow: never reached while the Databricks signature is
        installed on `dp` (dp_extensions.py), which registers through `register_auto_cdc_spec`."""
        raise GraphError(f"AUTO CDC flow `{flow.name or flow.target}`: pyspark's "
                         "create_auto_cdc_flow is not supported by the local runtime",
                         dataset=flow.target, file=self.loading)

    def register_auto_cdc_spec(self, spec: AutoCdcSpec) -> None:
        spec = replace(self._in_namespace(spec), source=self._own_name(spec.source))
        self.auto_cdc_flows.append(spec)
        self._declared(spec.name)

    def register_snapshot_spec(self, spec: SnapshotCdcSpec) -> None:
        """`create_auto_cdc_from_snapshot_flow`, through `dp_extensions` (pyspark has none);
        named after its target, so `problems` checks its name with its target."""
        spec = self._in_namespace(spec)
        self.snapshot_flows.append(spec)
        self._declared(spec.name)

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        raise GraphError("SQL pipeline files are not supported by the local runtime",
                         file=str(file_path))

    def _own_name(self, name: str) -> str:
        """`name` as the pipeline names its dataset: itself when it has one part, its last part
        when the others name the pipeline's catalog and schema, else `schema.name` or
        `catalog.schema.name` (`Namespace.dataset_key`): published there, as on Databricks."""
        try:
            return name if len(split(name)) == 1 else self.namespace.dataset_name(name)
        except NameSyntaxError:
            return name  # not a name of parts: the checks downstream say what is wrong with it

    def _dataset_name(self, name: str, published_view: bool) -> str:
        """A declared dataset's name (`_own_name`); a view is published in the pipeline's
        catalog."""
        own = self._own_name(name)
        table = self.namespace.table_of(own)
        if published_view and table.catalog.lower() != self.namespace.catalog.lower():
            raise DeclarationError(
                f"a view published in another catalog ({table.catalog}) than the pipeline's "
                f"({self.namespace.catalog}): the local runtime publishes views in the Spark "
                f"session's catalog, which is the pipeline's; name it in "
                f"{self.namespace.catalog}",
                dataset=name, file=self.loading)
        return own

    def _in_namespace(self, flow: AnyFlow) -> AnyFlow:
        """`flow` with its target, and its name where it is its target's (a dataset's own
        query), as the pipeline's dataset names; a sink's name as written."""
        target = flow.target if isinstance(self.outputs.get(flow.target), Sink) \
            else self._own_name(flow.target)
        if target == flow.target:
            return flow
        return replace(flow, target=target, name=target if flow.name == flow.target
                       else flow.name)

    def _declared(self, name: str) -> None:
        if self.loading is not None:
            self.declared_in.setdefault(name, self.loading)

    # -- views of the collected graph --------------------------------------------------------
    def tables(self) -> list[Table]:
        return [o for o in self.outputs.values() if isinstance(o, Table)]

    def is_view(self, name: str) -> bool:
        return isinstance(self.outputs.get(name), TemporaryView)

    def is_materialized_view(self, name: str) -> bool:
        return isinstance(self.outputs.get(name), MaterializedView)

    def sinks(self) -> list[Sink]:
        """The sinks (`dp.create_sink`): outputs written outside the pipeline, never read."""
        return [o for o in self.outputs.values() if isinstance(o, Sink)]

    def sink(self, name: str) -> Sink | None:
        output = self.outputs.get(name)
        return output if isinstance(output, Sink) else None

    def table_properties(self, name: str) -> dict[str, str]:
        return dict(getattr(self.outputs.get(name), "table_properties", None) or {})

    def query_decides_kind(self, name: str) -> bool:
        """Whether `name` is a `@dp.table`, which a batch query makes a materialized view."""
        return bool(getattr(self.outputs.get(name), "query_decides_kind", False))

    def decides_kind(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> bool:
        """Whether `flow` is a `@dp.table`'s own query: a batch one makes the table a
        materialized view, a streaming one a streaming table."""
        return flow.name == flow.target and self.query_decides_kind(flow.target)

    def definitions(self) -> dict[str, TableDefinition]:
        """Each table's declared definition, as the warehouse stores it."""
        return {t.name: TableDefinition(
            comment=t.comment, properties=self.table_properties(t.name),
            partition_cols=tuple(t.partition_cols or ()), cluster_by=tuple(t.cluster_by or ()),
            schema=t.schema if isinstance(t.schema, StructType) else None,
            location=getattr(t, "path", None), private=bool(getattr(t, "private", False)))
            for t in self.tables()}

    def all_flows(self) -> list[Flow | AutoCdcSpec | SnapshotCdcSpec]:
        return [*self.flows, *self.auto_cdc_flows, *self.snapshot_flows]

    def flows_into(self, name: str) -> list[Flow | AutoCdcSpec | SnapshotCdcSpec]:
        return [f for f in self.all_flows() if f.target == name]

    def view_flow(self, name: str) -> Flow:
        """The one query of temporary view `name` (an AUTO CDC flow cannot write a view)."""
        (flow,) = [f for f in self.flows if f.target == name]
        return flow

    # -- once every file has run ---------------------------------------------------------------
    def complete(self) -> None:
        """Give each AUTO CDC flow its target's table properties, then validate.

        Only now: a file may declare the flow before its target, or the target in another
        file. From here on the spec is where the runtime reads them (tombstone retention, the
        properties the target table is created with).
        """
        self.auto_cdc_flows = [replace(spec, target_properties=self.table_properties(spec.target))
                               for spec in self.auto_cdc_flows]
        self.snapshot_flows = [replace(spec, target_properties=self.table_properties(spec.target))
                               for spec in self.snapshot_flows]
        self.flows = [self._under_table(flow) for flow in self.flows]
        self.auto_cdc_flows = [self._under_table(spec) for spec in self.auto_cdc_flows]
        self.snapshot_flows = [self._under_table(spec) for spec in self.snapshot_flows]
        self.validate()

    def _under_table(self, flow: AnyFlow) -> AnyFlow:
        """`flow` with what `create_streaming_table` declares for every flow into its table:
        its expectations, after the flow's own (an AUTO CDC flow's are refused: `problems`),
        and its spark_conf, under the flow's own (where the flow has a spark_conf)."""
        table = self.outputs.get(flow.target)
        if not isinstance(table, DeclaredStreamingTable):
            return flow
        changes: dict[str, Any] = {}
        if table.expectations and isinstance(flow, Flow):
            changes["func"] = expectations.with_expectations(flow.func, table.expectations)
        if table.spark_conf and "spark_conf" in {f.name for f in fields(flow)}:
            changes["spark_conf"] = {**table.spark_conf, **getattr(flow, "spark_conf", {})}
        return replace(flow, **changes)

    def validate(self) -> None:
        """Raise the first of the graph's `problems`."""
        for problem in self.problems():
            raise problem

    def problems(self) -> Iterator[DeclarationError]:
        """Every problem of the declared graph, in the order the checks run, each naming the
        dataset it is about and the file that declared it. Expectation constraints are parsed
        in the active session (the one the files loaded in)."""
        yield from self._flow_problems()
        yield from self._sink_problems()
        for name in self.outputs:
            if not self.flows_into(name) and self.sink(name) is None:
                yield self._error(f"dataset `{name}` has no flow", name)
        yield from self._auto_cdc_target_problems()
        yield from self._published_view_problems()
        for name, output in self.outputs.items():
            try:
                table_properties.check(getattr(output, "table_properties", None) or {}, name)
            except DeclarationError as err:
                yield err.in_file(self.declared_in.get(name))
        for flow in self.flows:
            for error in expectations.declaration_problems(flow.func, flow.target):
                yield error.in_file(self.declared_in.get(flow.name))

    def _error(self, message: str, dataset: str, declared_by: str | None = None) -> GraphError:
        """A GraphError about `dataset`, naming the file that declared `declared_by` (by
        default the dataset)."""
        return GraphError(message, dataset=dataset,
                          file=self.declared_in.get(declared_by or dataset))

    def _flow_problems(self) -> Iterator[GraphError]:
        for flow in self.all_flows():
            if flow.target not in self.outputs:
                yield self._error(f"flow `{flow.name}` writes to `{flow.target}`, "
                                  "which no file declares", flow.target, flow.name)
        for name in self.outputs:
            others = [f.name for f in self.flows_into(name) if f.name != name]
            if self.is_view(name) and others:  # a view is read as its query (view_flow)
                yield self._error(f"temporary view `{name}` has no flow but its own query; "
                                  f"{', '.join(f'`{n}`' for n in others)} also write(s) it",
                                  name, others[0])
        for spec in self.auto_cdc_flows:
            if spec.source not in self.outputs:  # a change feed of the pipeline (update.py)
                yield self._error(f"AUTO CDC flow `{spec.name}` reads `{spec.source}`, which the "
                                  "pipeline does not define", spec.target, spec.name)
            if spec.target in self.outputs and self.sink(spec.target) is None \
                    and not isinstance(self.outputs[spec.target], StreamingTable):
                yield self._error(f"AUTO CDC target `{spec.target}` must be a streaming table",
                                  spec.target, spec.name)
        for snapshot in self.snapshot_flows:
            if snapshot.target not in self.outputs or self.sink(snapshot.target) is not None:
                continue
            if not isinstance(self.outputs[snapshot.target], StreamingTable):
                yield self._error(f"AUTO CDC FROM SNAPSHOT target `{snapshot.target}` must be a "
                                  "streaming table (dp.create_streaming_table)", snapshot.target,
                                  snapshot.name)
                continue
            others = [f.name for f in self.flows_into(snapshot.target) if f is not snapshot]
            if others:
                yield self._error(f"AUTO CDC FROM SNAPSHOT flow `{snapshot.name}` must be the only "
                                  f"flow into `{snapshot.target}`; "
                                  f"{', '.join(f'`{n}`' for n in others)} also write(s) it",
                                  snapshot.target, snapshot.name)
            elif sum(f.name == snapshot.name for f in self.all_flows()) > 1:
                yield self._error(f"flow `{snapshot.name}` is defined twice", snapshot.target,
                                  snapshot.name)

    def _sink_problems(self) -> Iterator[GraphError]:
        """A sink takes append flows only, without expectations (Databricks' sink reference)."""
        for sink in self.sinks():
            for flow in self.flows_into(sink.name):
                if isinstance(flow, AutoCdcSpec | SnapshotCdcSpec):
                    kind = "AUTO CDC" if isinstance(flow, AutoCdcSpec) else "AUTO CDC FROM SNAPSHOT"
                    yield self._error(f"sink `{sink.name}` takes append flows only "
                                      f"(@dp.append_flow); {kind} flow `{flow.name}` writes it",
                                      sink.name, flow.name)
                elif expectations.declared(flow.func):
                    yield self._error(f"expectations are not supported on a sink: flow "
                                      f"`{flow.name}` writes sink `{sink.name}`", sink.name,
                                      flow.name)

    def _auto_cdc_target_problems(self) -> Iterator[GraphError]:
        """What `create_streaming_table` declares that AUTO CDC flows do not apply locally."""
        specs: list[AutoCdcSpec | SnapshotCdcSpec] = [*self.auto_cdc_flows, *self.snapshot_flows]
        for spec in specs:
            table = self.outputs.get(spec.target)
            if not isinstance(table, DeclaredStreamingTable):
                continue
            if table.expectations:
                yield self._error(f"create_streaming_table: expect_all* on the target of AUTO "
                                  f"CDC flow `{spec.name}` are not supported by the local "
                                  "runtime", spec.target)
            if table.schema is not None:
                yield self._error(f"create_streaming_table: a declared schema on the target of "
                                  f"AUTO CDC flow `{spec.name}` is not supported by the local "
                                  "runtime", spec.target)

    def published_views(self) -> list[PublishedView]:
        return [o for o in self.outputs.values() if isinstance(o, PublishedView)]

    def _published_view_problems(self) -> Iterator[GraphError]:
        """A published view reads what is published too: a view of the catalog cannot name
        the pipeline's temporary views or private tables."""
        for view in self.published_views():
            for name in view.reads:
                read = self.outputs.get(name)
                hidden = (isinstance(read, TemporaryView) and not isinstance(read, PublishedView)
                          or bool(getattr(read, "private", False)))
                if hidden:
                    yield self._error(f"view `{view.name}` reads `{name}`, which the pipeline "
                                      "does not publish (a temporary view or a private table): "
                                      "a view is published, and reads what is", view.name)

    def wall_clock_warnings(self) -> Iterator[tuple[str, str]]:
        """(target, message) for each SCD1 target whose rows depend on when the pipeline runs:
        its deletes leave tombstones that expire after
        `pipelines.cdc.tombstoneGCThresholdInSeconds` of processing time (Databricks' default:
        2 days), after which an event older than the delete re-creates the key. Databricks runs
        such a table, so it is a warning, not a problem; an SCD2 table over the same changes
        keeps every delete, which the message names."""
        scd2 = {(s.source, s.keys): s for s in self.auto_cdc_flows if s.stored_as_scd_type == 2}
        for spec in self.auto_cdc_flows:
            if spec.stored_as_scd_type != 1 or (spec.apply_as_deletes is None
                                                and spec.apply_as_truncates is None):
                continue
            properties = self.table_properties(spec.target)
            try:
                seconds = tombstone_gc_seconds(properties)
            except ValueError:  # not a number: a problem of the table's properties
                continue
            if seconds >= TOMBSTONE_GC_NEVER_SECONDS:
                continue
            setting = TOMBSTONE_GC_THRESHOLD if TOMBSTONE_GC_THRESHOLD in properties \
                else f"{TOMBSTONE_GC_THRESHOLD} unset: Databricks' default"
            history = scd2.get((spec.source, spec.keys))
            beside = (f"; the SCD2 table `{history.target}` over the same changes keeps every "
                      "delete" if history is not None else "")
            yield spec.target, (
                f"`{spec.target}` expires the tombstones of deleted keys after {seconds:g} s "
                f"({setting}): an event older than a delete that arrives later re-creates its "
                f"key, so the table depends on when the pipeline runs{beside}; "
                f"{TOMBSTONE_GC_THRESHOLD} = {TOMBSTONE_GC_NEVER_SECONDS} keeps them")
