"""One pipeline update: every dataset brought up to date, upstream before downstream.

Order comes from the reads themselves: when a flow's query reads a dataset of the pipeline, that
dataset is updated first (see `reads.py`), so each flow sees its inputs complete for this update.
A stream of a table is the one read that can be built while the table updates (its query then
starts after it: `_streamed_before_update`); every other read waits where it is made.
Temporary views are not stored; a read of one returns its query. A refresh selection
(`refresh.py`) limits the update to some tables: the others are read as they are.

Tables that do not read each other are updated at the same time, as on Databricks: each table
has a thread of its own, which waits for the tables its flows read. On two cores this overlaps
one flow's driver work (planning, Delta commits) with another's tasks.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pyspark.pipelines.flow import Flow
from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import DeclarationError, ExactlyOnceError, GraphError, first_line
from exactly_once.local.auto_cdc.from_snapshot import flow as snapshot_flow
from exactly_once.local.auto_cdc.from_snapshot.spec import NextSnapshot, SnapshotCdcSpec
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.auto_loader import hook as auto_loader
from exactly_once.local.auto_loader.place import Placement
from exactly_once.local.catalog.catalog import LocalCatalog
from exactly_once.local.catalog.names import Namespace
from exactly_once.local.catalog.scope import ReadScope
from exactly_once.local.engine import pipeline_session
from exactly_once.local.engine.sql_parser import quiet_query_context
from exactly_once.local.execution import checkpoints, flow_kinds, flows, schema_check, unchanged
from exactly_once.local.execution.flow_kinds import Query
from exactly_once.local.execution.refresh import RefreshSelection, plan_refresh
from exactly_once.local.execution.streams import flow_error
from exactly_once.local.graph.event_hooks import run_hooks
from exactly_once.local.graph.expectations import ObservedExpectations, apply_expectations, declared
from exactly_once.local.graph.reads import NO_OPTIONS, resolved_reads
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.graph.sql_queries import resolved_sql
from exactly_once.local.observe import event_log
from exactly_once.local.observe.progress import FlowResult, Progress, UpdateResult
from exactly_once.local.observe.timeline import UPDATE, WAIT_FOR_UPSTREAM, Timeline
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import Warehouse


@dataclass
class _FlowSetup:
    """What building one flow's query saw: expectations of the views it read (counted by this
    flow), the tables it reads as streams, and those of them it was built without waiting for
    (`PipelineUpdate._streamed_before_update`): its query starts once they are up to date."""

    table: str
    flow: str
    observed: list[ObservedExpectations] = field(default_factory=list)
    streamed: set[str] = field(default_factory=set)
    not_waited_for: list[str] = field(default_factory=list)
    # The schema (its log's schemaString) each table not waited for had when the query was built.
    built_against: dict[str, str | None] = field(default_factory=dict)
    # The tables it read as a batch: their path and the version read (execution/unchanged.py).
    batch_reads: dict[str, unchanged.TableRead] = field(default_factory=dict)


def default_scope(warehouse: Warehouse) -> ReadScope:
    """The scope of an update given none: `main.default`, in the warehouse's own catalog."""
    return ReadScope(Namespace(), LocalCatalog(warehouse.catalog_root()))


class PipelineUpdate:
    def __init__(self, spark: SparkSession, graph: PipelineGraph, warehouse: Warehouse,
                 progress: Progress | None = None, timeline: Timeline | None = None,
                 definition: str | None = None, scope: ReadScope | None = None):
        """`definition`: the fingerprint of what decides the flows' schemas
        (schema_check.fingerprint); None checks them whatever the last update recorded.
        `scope`: where the pipeline publishes and what names it reads resolve to (default: the
        warehouse's own catalog, `main.default`)."""
        self.spark, self.graph = spark, graph
        self.scope = scope or default_scope(warehouse)
        self.definition = definition
        # Holding each table's declared definition: where it is stored, whether it is
        # published, what Delta keeps of it (storage/table_definition.py).
        try:
            self.warehouse = warehouse.declaring(graph.definitions())
        except DeclarationError as err:  # a table its file moved: named with the file
            raise err.in_file(graph.declared_in.get(err.dataset or "")) from None
        self.progress = progress or Progress(quiet=True)
        self.timeline = timeline or Timeline()
        self.update_id = event_log.new_update_id()
        # The version of a snapshot taken of a table or view in this update (Databricks' rule).
        self.processing_time = snapshot_flow.processing_time()
        self.result = UpdateResult(update_id=self.update_id, timeline=self.timeline)
        self._lock = threading.Lock()
        self._tables: dict[str, Future[None]] = {}  # table -> done when it is up to date
        self._waits_for: dict[str, set[str]] = {}  # table -> tables its flows wait for
        self._reset: set[str] = set()
        self._setup = threading.local()  # .flow: the _FlowSetup of the flow this thread builds
        self._failures: list[Exception] = []  # what the flows that failed raised

    def run(self, selection: RefreshSelection | None = None) -> UpdateResult:
        timeline = self.timeline
        timeline.mark_first_job(self.spark)
        tables = [t.name for t in self.graph.tables()]
        plan = plan_refresh(self.graph, selection or RefreshSelection())
        if unfinished := self.warehouse.unfinished_reset():  # a full refresh was cut short
            plan = plan.with_reset(self.graph, unfinished)
        with timeline.span(UPDATE, "check schemas"):  # before anything is written
            schema_check.refuse_incompatible(
                self.spark, self.graph, self.warehouse,
                [t for t in plan.update if t not in plan.reset], self.definition)
        self._reset = set(plan.reset)
        self.result.reset = list(plan.reset)
        self.warehouse.begin_reset(plan.reset)
        with timeline.span(UPDATE, "reset tables"):
            self.warehouse.reset(self.spark, {name: [f.name for f in self.graph.flows_into(name)]
                                              for name in plan.reset})
            for sink in plan.sinks if plan.restart_sinks else []:  # never cleared (refresh.py)
                for flow in self.graph.flows_into(sink):
                    self.warehouse.reset_checkpoint(flow.name)
        with timeline.span(UPDATE, "attach the catalog"):  # fixtures seeded, catalogs named
            event_log_name = self.scope.published_event_log(tables)  # the bundle's event_log
            if event_log_name is not None:  # named before the catalogs are: its own may be new
                self.scope.catalog.publish(event_log_name,
                                           str(self.warehouse.event_log_path().resolve()))
            self.scope.catalog.attach(self.spark, self.scope.namespace, datasets=tables)
        with timeline.span(UPDATE, "register tables"):
            # A run killed while creating a table left it without a version: created anew.
            self.warehouse.clear_half_created(tables)
            for name in tables:
                if self.warehouse.has_table(name):
                    self.warehouse.register(self.spark, name)
        for name in set(tables) - set(plan.update):  # read as they are
            self._tables[name] = Future[None]()
            self._tables[name].set_result(None)
        try:
            with resolved_reads(self._resolve), resolved_sql(self._resolve):
                futures = [self._table_update(name) for name in [*plan.update, *plan.sinks]]
                errors = [f.exception() for f in futures]  # waits for every table's thread
            first_error = next((e for e in errors if e is not None), None)
            if first_error is not None:
                raise first_error
            self.warehouse.end_reset()  # every reset table is recomputed
            if self.definition is not None and set(plan.update) == set(tables):
                # Every table took this definition: the next update checks only a new one.
                schema_check.record(self.warehouse, self.graph, self.definition)
            with timeline.span(UPDATE, "publish tables"):  # as catalog.schema.name
                self._publish(tables)
            with timeline.span(UPDATE, "publish views"):  # over the tables, now up to date
                for view in self.graph.published_views():
                    self.warehouse.publish_view(self.spark, view.name, view.definition,
                                                view.comment, view.table_properties)
            with timeline.span(UPDATE, "row counts"):
                self.result.table_rows = {name: self.warehouse.row_count(self.spark, name)
                                          for name in tables}
        finally:  # one flow_progress row per flow that ran (in the order they ended), failed
            self.result.seconds = timeline.now()
            timeline.count_spark_jobs(self.spark)
            with timeline.span(UPDATE, "event log"):
                events = event_log.append(self.spark, self.warehouse, self.result.flows,
                                          self.update_id, timeline)
            if self.graph.event_hooks:  # each event to each hook; none fails the update
                with timeline.span(UPDATE, "event hooks"):
                    event_log.append_hook_progress(
                        self.spark, self.warehouse, run_hooks(self.graph.event_hooks, events),
                        self.update_id)
        return self.result

    def _publish(self, tables: list[str]) -> None:
        """Each table the pipeline publishes (every one but its private ones), named in the
        local catalog under the pipeline's catalog and schema, or those its name gives."""
        for name in tables:
            if not self.warehouse.definition(name).private and self.warehouse.has_table(name):
                self.scope.catalog.publish(
                    self.scope.namespace.table_of(name),
                    str(self.warehouse.table_path(name).resolve()))

    def _table_update(self, name: str) -> Future[None]:
        """The future of `name`'s update, started in a thread of its own on first request."""
        with self._lock:
            if name not in self._tables:
                self._tables[name] = future = Future[None]()
                threading.Thread(target=self._update, args=(name, future),
                                 name=f"update-{name}", daemon=True).start()
            return self._tables[name]

    def _update(self, name: str, future: Future[None]) -> None:
        try:
            for flow in self.graph.flows_into(name):
                self._run_flow(flow)
        except BaseException as err:  # noqa: BLE001 - handed to whoever waits for the table
            future.set_exception(err)
        else:
            future.set_result(None)

    def _wait_for(self, reader: str, name: str, flow: str) -> None:
        """Block `reader`'s thread until `name` is up to date; a cycle is an error, not a hang."""
        with self._lock:
            self._waits_for.setdefault(reader, set()).add(name)
            path = self._path(name, reader)
        if path:
            cycle = [reader, *path[:-1]]
            order = [t.name for t in self.graph.tables()]
            first = min(range(len(cycle)), key=lambda i: order.index(cycle[i]))
            cycle = cycle[first:] + cycle[:first]
            raise GraphError(f"datasets read each other in a cycle: "
                             f"{' -> '.join([*cycle, cycle[0]])}")
        with self.timeline.span(flow, WAIT_FOR_UPSTREAM, detail=name):
            self._table_update(name).result()

    def _path(self, start: str, goal: str) -> list[str]:
        """Tables from `start` to `goal` along waits, both included; [] if there is none."""
        stack, seen = [[start]], set()
        while stack:
            path = stack.pop()
            if path[-1] == goal:
                return path
            if path[-1] in seen:
                continue
            seen.add(path[-1])
            stack.extend([*path, t] for t in self._waits_for.get(path[-1], ()))
        return []

    def _resolve(self, text: str, streaming: bool, options: Mapping[str, str] = NO_OPTIONS
                 ) -> DataFrame | None:
        """`text` (a name of one to three parts) as the flow being built on this thread reads
        it, in that flow's session, with the `options` its reader was given."""
        setup: _FlowSetup | None = getattr(self._setup, "flow", None)
        session = pipeline_session.current(self.spark)
        name = self.scope.dataset(text, self.graph.outputs)
        if name is None:  # not ours: a table of the local catalog, or Spark's
            try:
                return self.scope.external(session, text, streaming,
                                           dataset=setup.table if setup else None,
                                           datasets=self.graph.outputs, options=options)
            except DeclarationError as err:
                raise err.in_file(self.graph.declared_in.get(setup.flow if setup else "")) \
                    from None
        if self.graph.sink(name) is not None:
            raise GraphError(f"`{name}` is a sink: the pipeline writes it, and cannot read it")
        if self.graph.is_view(name):
            view_flow = self.graph.view_flow(name)
            df, observed = apply_expectations(self._view_query(view_flow, session),
                                              declared(view_flow.func), name)
            if observed is not None and setup is not None:  # counted by the reading flow
                setup.observed.append(observed)
            return df
        if setup is None:
            raise GraphError(f"`{name}` is read outside a flow's query")
        first_batch = streaming and checkpoints.asks_for_first_batch(
            self.warehouse.checkpoint_path(setup.flow))
        if streaming and not first_batch and self._streamed_before_update(name):
            setup.not_waited_for.append(name)
            setup.built_against[name] = delta_log.schema_string(
                self.warehouse.table_path(name).resolve())
        else:
            self._wait_for(setup.table, name, setup.flow)
        if streaming:
            setup.streamed.add(name)
        path = self.warehouse.table_path(name).resolve()
        if not streaming:
            if options:
                # Delta's reader, as the options ask (`versionAsOf`, ...); not a read of the
                # latest version, so not one a view's refresh can be skipped for (unchanged.py).
                return session.read.format("delta").options(**options).load(str(path))
            # The files its log names: no rebuild of its Delta state.
            setup.batch_reads[name] = (str(path), delta_log.latest_version(path))
            return read_latest(session, str(path))
        reader = session.readStream.format("delta").options(**options)
        # With options of its own, the query starts where Delta's default (or they) say.
        if first_batch and not options and delta_log.appends_since_creation(path):
            # A query's first batch reads the table's commits from its creation on, not a
            # snapshot of it: the same rows when every commit only appended (delta_log), and
            # Delta's snapshot costs several Spark jobs, at the query's start and again at
            # each restart while batch 0 is its only one (Spark asks for it again). Any other
            # table is read from its snapshot, as Spark's default does.
            reader = reader.option("startingVersion", "0")
        return reader.load(str(path))

    def _built_against_upstream(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec
                                ) -> tuple[Query, _FlowSetup]:
        """The flow's query, its upstream tables up to date before it starts.

        A query built against tables before their update (`_streamed_before_update`) is built
        again, once, when one of them changed its schema in the update (a column added, a type
        widened: a stream of the old schema cannot read the new one, Delta refuses the batch)
        or when building it failed (it names a column the table gains in the update). Its
        upstream is then up to date, so the second build sees the tables as they are, and an
        error it raises is the query's own. On Databricks the flow is restarted for the same
        reason."""
        setup = _FlowSetup(table=flow.target, flow=flow.name)
        df: Query | None
        with self.timeline.span(flow.name, "build query"):
            try:
                with quiet_query_context():  # raised again below, or built again
                    df = self._build(flow, setup)
            except Exception:
                if not setup.not_waited_for:
                    raise
                df = None
        for name in setup.not_waited_for:  # up to date before the query asks for offsets
            self._wait_for(setup.table, name, setup.flow)
        if df is None or self._schema_changed_since_built(setup):
            with self.timeline.span(flow.name, "build query", detail="schema changed"):
                setup = _FlowSetup(table=flow.target, flow=flow.name)
                df = self._build(flow, setup)
        return df, setup

    def _schema_changed_since_built(self, setup: _FlowSetup) -> bool:
        """Whether a table the query was built against before its update has another schema
        now that the update is done."""
        return any(delta_log.schema_string(self.warehouse.table_path(name).resolve()) != seen
                   for name, seen in setup.built_against.items())

    def _view_query(self, view: Flow, reader: SparkSession) -> DataFrame:
        """A temporary view's query, inlined into the reading flow's: built in the view's own
        session when it declares `spark_conf`, and continued in the reader's."""
        if not view.spark_conf:
            return view.func()
        with pipeline_session.running(self._session_of(view)):
            query = view.func()
        return pipeline_session.moved(query, reader)

    def _session_of(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> SparkSession:
        """The session `flow` runs in: the pipeline's, or its own with its `spark_conf`."""
        conf = getattr(flow, "spark_conf", None)
        try:
            return pipeline_session.with_conf(self.spark, conf)
        except Exception as err:  # noqa: BLE001 - Spark's refusal of a setting, as one line
            raise DeclarationError(f"flow `{flow.name}`: spark_conf: {first_line(err)}",
                                   dataset=flow.target,
                                   file=self.graph.declared_in.get(flow.name)) from None

    def _streamed_before_update(self, name: str) -> bool:
        """Whether a query past its first batch can build its stream of table `name` while the
        table's own update runs, and wait for it only before the query starts.

        A stream's DataFrame holds no rows: the query asks the table for its offsets when it
        starts. What building it reads of the table is its schema, which a streaming table's
        update keeps unless its flow's query changed (appends and MERGEs never change it; a
        materialized view's overwrite may; a table that evolves has the query built again,
        `_schema_changed_since_built`), and, for a query's first batch only, whether the
        table's commits only appended (`_resolve`). So a streaming table that exists and is not
        reset in this update is built against early: the build's work (the pipeline file's
        function, its plans' analysis) then overlaps the upstream's instead of following it, as
        it did on the path from bronze to gold."""
        return (name not in self._reset and not self.graph.is_materialized_view(name)
                and self.warehouse.has_table(name))

    def _build(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec, setup: _FlowSetup) -> Query:
        """The flow's query, with upstream tables brought up to date on the way; what building
        it saw goes into `setup`."""
        outer = getattr(self._setup, "flow", None)
        self._setup.flow = setup
        df: Query
        try:
            if isinstance(flow, SnapshotCdcSpec):
                df = self._snapshots(flow, setup)
            elif isinstance(flow, AutoCdcSpec):  # a once flow reads its source as a batch
                changes = self._resolve(flow.source, streaming=not flow.once)
                if changes is None:
                    raise GraphError(f"AUTO CDC flow `{flow.name}` reads `{flow.source}`, "
                                     "which the pipeline does not define")
                df = changes
            else:
                # Auto Loader reads keep their schema under the flow's checkpoint, as
                # pipelines do (auto_loader/hook.py).
                with auto_loader.building(Placement(
                        flow=flow.name, dataset=flow.target,
                        file=self.graph.declared_in.get(flow.name),
                        checkpoint=self.warehouse.checkpoint_path(flow.name), persist=True)):
                    query = flow.func()
                df, own = apply_expectations(query, declared(flow.func), flow.target)
                if own is not None:
                    setup.observed.append(own)
        finally:
            self._setup.flow = outer
        return df

    def _snapshots(self, spec: SnapshotCdcSpec, setup: _FlowSetup) -> NextSnapshot:
        """A snapshot flow's source: the table or view once, at this update's processing time,
        or the function, asked with its reads resolved as this flow's."""
        function = spec.source_function
        if function is None:
            return snapshot_flow.one_snapshot(snapshot_flow.table_snapshot(
                pipeline_session.current(self.spark), str(spec.source), self._resolve),
                self.processing_time)

        def next_snapshot(latest: Any) -> tuple[DataFrame, Any] | None:
            outer = getattr(self._setup, "flow", None)
            self._setup.flow = setup
            try:
                return function(latest)
            finally:
                self._setup.flow = outer

        return next_snapshot

    def _runner(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec, query: Query | None,
                setup: _FlowSetup | None = None) -> tuple[str, flow_kinds.FlowRunner]:
        """The flow's kind and its runner in the flow's session (flow_kinds.py)."""
        return flow_kinds.runner(pipeline_session.current(self.spark), self.graph, flow, query,
                                 None if setup is None else setup.batch_reads, self.definition)

    def _run_flow(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> None:
        """The flow built and run on this thread in its session (`_session_of`): what its code
        asks for (`spark`, getActiveSession(), builder.getOrCreate()) is that session."""
        with pipeline_session.running(self._session_of(flow)):
            self._run_in_session(flow)

    def _run_in_session(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> None:
        started = self.timeline.now()
        if flows.ran_once(self.warehouse, flow):  # until a full refresh recreates its target
            kind, _ = self._runner(flow, None)
            self.progress.flow_started(flow.name, kind)
            self._finished(FlowResult(flow=flow.name, target=flow.target, kind=kind))
            return
        try:
            df, setup = self._built_against_upstream(flow)
        except Exception as err:
            if any(err is failure for failure in self._failures):  # an upstream flow's
                raise
            self._failed(flow, self._runner(flow, None)[0], err, started)
        kind, run = self._runner(flow, df, setup)
        if setup.streamed & self._reset and flow.target not in self._reset:
            # A kept table (protected, or not selected) reads a table rebuilt in this update:
            # its checkpoint names the old table, so it reads the new one from the start.
            self.warehouse.reset_checkpoint(flow.name)
        self.progress.flow_started(flow.name, kind)
        try:
            flow_kinds.check_query(self.graph, self.warehouse, flow, kind, df)
            result = run(df, self.warehouse, self.progress, self.timeline)
        except Exception as err:
            self._failed(flow, kind, err, started)
        result.seconds = self.timeline.now() - started
        # Expectation counts, from the same pass that wrote the rows; a view skipped as
        # unchanged ran no query, so it counted nothing (its Observation would never answer).
        for o in setup.observed if result.status != "SKIPPED" else []:
            o.collect(result.observed)
            result.expectations += o.metrics
            result.dropped_records = (result.dropped_records or 0) + o.dropped_records
        self._finished(result)

    def _failed(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec, kind: str, err: Exception,
                started: float) -> NoReturn:
        """Record `flow`'s failure (while its query was built, or while it ran) for the event
        log, then raise it as one line naming the flow."""
        # Spark's own errors outside a query (creating a table, say) as one line too.
        failure = err if isinstance(err, ExactlyOnceError) else flow_error(flow.name, err)
        if isinstance(failure, DeclarationError):  # found once the query was built
            failure.in_file(self.graph.declared_in.get(flow.name))
        with self._lock:
            self.result.flows.append(FlowResult(
                flow=flow.name, target=flow.target, kind=kind, status="FAILED",
                error=str(failure), seconds=self.timeline.now() - started))
            # A flow that reads this one's table gets this error: not a failure of its own.
            self._failures += [err, failure]
        if failure is err:
            raise err
        raise failure from err

    def _finished(self, result: FlowResult) -> None:
        self.progress.flow_finished(result)
        with self._lock:
            self.result.flows.append(result)
