"""`exactly-once dry-run`: the pipeline checked without reading or writing any data.

As `spark-pipelines dry-run` (and `databricks bundle run --validate-only`): every pipeline file
runs, the graph is validated (names, flows, targets), and each flow's query is built and
analyzed, so an unknown dataset or column, a type error, an expectation that is not SQL or a
query that does not fit its table's declared schema is found before an update starts. A
`@dp.table` over a batch query is a materialized view here too. Reads of pipeline datasets
inside a flow are answered with an empty DataFrame of that dataset's schema (a never-started
stream for streaming reads), so the datasets are analyzed upstream first and no table,
checkpoint or Kafka topic is touched. The Kafka source itself is only declared, never started:
declaring it reads nothing.

Problems are collected, not raised: one per file that fails to run, per graph rule broken and
per dataset whose query does not analyze. A dataset that reads a broken one is not analyzed
(its problem is upstream).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.pipelines.flow import Flow
from pyspark.pipelines.graph_element_registry import graph_element_registration_context
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from exactly_once.errors import CatalogError, DeclarationError, GraphError, first_line, located
from exactly_once.local.auto_cdc.changes import check_columns, check_source, source_named
from exactly_once.local.auto_cdc.from_snapshot import flow as snapshot_flow
from exactly_once.local.auto_cdc.from_snapshot import versions as snapshot_versions
from exactly_once.local.auto_cdc.from_snapshot.apply import target_schema
from exactly_once.local.auto_cdc.from_snapshot.spec import SnapshotCdcSpec
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.auto_cdc.writer import scd_type_of
from exactly_once.local.auto_loader import hook as auto_loader
from exactly_once.local.auto_loader.place import Placement
from exactly_once.local.catalog.names import Namespace
from exactly_once.local.catalog.scope import ReadScope
from exactly_once.local.engine import pipeline_session, update_settings
from exactly_once.local.engine.sql_parser import quiet_query_context
from exactly_once.local.graph import dp_extensions
from exactly_once.local.graph.dataflow import (
    APPEND,
    MATERIALIZED_VIEW,
    VIEW,
    Dataflow,
    DatasetNode,
    FlowNode,
    Read,
    auto_cdc_kind,
    dataset_kind,
)
from exactly_once.local.graph.dataset_declarations import batch_table_with_flows
from exactly_once.local.graph.expectations import Expectation, apply_expectations, declared
from exactly_once.local.graph.flow_declarations import (
    check_append_query,
    check_appended_stream,
    check_flow_query,
    is_once,
)
from exactly_once.local.graph.loader import importable, run_file
from exactly_once.local.graph.reads import NO_OPTIONS, resolved_reads
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.graph.sql_queries import resolved_sql
from exactly_once.local.graph.stored_tables import StoredTables
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.settings.pipeline import Settings

# The columns Delta's change data feed adds to a table's own
# (https://docs.databricks.com/aws/en/delta/delta-change-data-feed).
CHANGE_FEED_COLUMNS = (StructField("_change_type", StringType()),
                       StructField("_commit_version", LongType()),
                       StructField("_commit_timestamp", TimestampType()))


@dataclass(frozen=True)
class Problem:
    message: str
    file: str | None = None
    dataset: str | None = None

    @classmethod
    def of(cls, error: DeclarationError) -> Problem:
        return cls(error.message, error.file, error.dataset)

    def line(self) -> str:
        """As `run` prints the same mistake (errors.DeclarationError)."""
        return located(self.message, self.file, self.dataset)


@dataclass
class Analysis:
    graph: PipelineGraph
    dataflow: Dataflow
    problems: list[Problem] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    # flow -> the schema its query writes (an AUTO CDC flow: its target's); a flow whose
    # query did not analyze has none.
    schemas: dict[str, StructType] = field(default_factory=dict)
    # What Databricks runs but makes a table depend on when the pipeline runs (a warning each).
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class _Blocked(Exception):
    """A read of a dataset whose problem is already reported: stop analyzing the reader."""


class _Analyzer:
    def __init__(self, spark: SparkSession, graph: PipelineGraph, declared_in: dict[str, str],
                 stored: StoredTables | None = None, ask_snapshots: bool = True,
                 scope: ReadScope | None = None):
        self.spark, self.graph, self.declared_in = spark, graph, declared_in
        self.scope = scope
        # A snapshot function is asked for what the next update asks it (the stored version),
        # or not asked, its target's stored schema standing for it.
        self.stored, self.ask_snapshots = stored, ask_snapshots
        self.problems: list[Problem] = []
        self.schemas: dict[str, StructType] = {}
        self.failed: set[str] = set()
        self.stack: list[str] = []  # datasets being analyzed, outermost first
        self.reads: dict[str, list[Read]] = {}  # flow -> what its query read
        self.flow_schemas: dict[str, StructType] = {}  # flow -> what its query writes
        self.reading: list[str] = []  # flows whose queries are being built, innermost last
        self.definitions = graph.definitions()  # each table's
        self.batch_tables: set[str] = set()  # @dp.table over a batch query: materialized views

    def report(self, dataset: str | None, message: str) -> None:
        self.problems.append(Problem(message, self.declared_in.get(dataset or ""), dataset))

    # -- datasets --------------------------------------------------------------------------------
    def dataset(self, name: str) -> StructType:
        """The schema of `name`'s query, analyzing it first; _Blocked when it has a problem."""
        if name in self.failed:
            raise _Blocked(name)
        if name in self.stack:
            cycle = [*self.stack[self.stack.index(name):], name]
            self.report(name, "datasets read each other in a cycle: " + " -> ".join(cycle))
            self.failed.update(cycle)
            raise _Blocked(name)
        if name not in self.schemas:
            self.stack.append(name)
            try:
                self.schemas[name] = self._analyze(name)
            except _Blocked:
                self.failed.add(name)
                raise
            except Exception as err:  # noqa: BLE001 - any failure of user code is a problem
                self.failed.add(name)
                self.report(name, err.message if isinstance(err, DeclarationError)
                            else first_line(err))
                raise _Blocked(name) from None
            finally:
                self.stack.pop()
        return self.schemas[name]

    def _analyze(self, name: str) -> StructType:
        """The dataset's schema: its declared one, else its first flow's query's. Each query
        must fit the table's declaration (as an update checks it before writing), and a
        `@dp.table` over a batch query, a materialized view, has no other flow."""
        schema = None
        definition = self.definitions.get(name)
        for flow in self.graph.flows_into(name):
            df = self.query(flow)
            self.flow_schemas[flow.name] = df.schema
            schema = schema or df.schema
            if definition is not None:
                problem = definition.fit_problem(df.schema)
                if problem:
                    raise DeclarationError(problem, dataset=name)
            if self.graph.decides_kind(flow) and not df.isStreaming:
                self.batch_tables.add(name)
        if schema is None:
            raise GraphError(f"dataset `{name}` has no flow")
        if name in self.batch_tables:
            others = [f.name for f in self.graph.flows_into(name) if f.name != name]
            if others:
                raise batch_table_with_flows(name, others)
        return definition.table_schema(schema) if definition is not None else schema

    def query(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> DataFrame:
        """The flow's query, analyzed in the flow's session (its `spark_conf`, as an update
        runs it: engine/pipeline_session.py), with the reads it makes recorded."""
        self.reads.setdefault(flow.name, [])
        self.reading.append(flow.name)
        session = pipeline_session.with_conf(self.spark, getattr(flow, "spark_conf", None))
        try:
            with pipeline_session.running(session):
                return self._query(flow)
        finally:
            self.reading.pop()

    def _query(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> DataFrame:
        if isinstance(flow, AutoCdcSpec):
            return self._auto_cdc(flow)
        if isinstance(flow, SnapshotCdcSpec):
            return self._snapshot_cdc(flow)
        with auto_loader.building(Placement(flow=flow.name, dataset=flow.target,
                                            file=self.declared_in.get(flow.name))):
            df = flow.func()  # Auto Loader's schema inferred, nothing recorded
        check_flow_query(flow, df, self.graph.sink(flow.target))
        if self._appends(flow):
            check_append_query(flow.name, flow.target, df)
        if not self.graph.is_view(flow.target):  # a view's query is checked in its readers'
            check_appended_stream(flow.name, flow.target, df)
        for e in declared(flow.func):
            _check_expectation(df, e)
        df, _ = apply_expectations(df, declared(flow.func), flow.target)
        _ = df.schema  # analysis is the point
        return df

    def _external(self, text: str, streaming: bool, options: Mapping[str, str] = NO_OPTIONS
                  ) -> DataFrame | None:
        """A read of a table the pipeline does not define, as the update will make it: the
        local catalog's table (or the fixture that seeds it) as an empty query of its schema,
        else Spark's own, else a problem naming it."""
        assert self.scope is not None
        table = self.scope.table(text)
        if table is None:
            return None
        session = pipeline_session.current(self.spark)
        schema = self.scope.catalog.schema_of(session, table)
        if schema is None:
            self.scope.require(session, text, table, self.stack[-1] if self.stack else None,
                               self.graph.outputs)
            return None
        return _empty(session, _as_read(schema, options), streaming)

    def _appends(self, flow: Flow) -> bool:
        """Whether `flow` is an append flow into a streaming table, as an update decides it
        (flow_kinds.runner): not once, not into a sink, a view or a materialized
        view, and not a `@dp.table`'s own query (which a batch query makes a materialized
        view)."""
        target = flow.target
        return not (is_once(flow) or self.graph.sink(target) is not None
                    or self.graph.is_view(target) or self.graph.is_materialized_view(target)
                    or self.graph.decides_kind(flow))

    def _inline_view(self, name: str) -> DataFrame:
        """A read of temporary view `name`: its query, built in the reader's."""
        self.dataset(name)
        view = self.graph.view_flow(name)
        self.reading.append(view.name)  # what the view reads is the view's read, not the reader's
        try:
            return apply_expectations(view.func(), declared(view.func), name)[0]
        finally:
            self.reading.pop()

    def _auto_cdc(self, spec: AutoCdcSpec) -> DataFrame:
        source = self.resolve(spec.source, streaming=not spec.once)
        if source is None:
            raise GraphError(f"AUTO CDC flow `{spec.name}` reads `{spec.source}`, which the "
                             "pipeline does not define")
        check_source(spec, source)
        check_appended_stream(spec.name, spec.target, source)
        named = source_named(spec, source.columns)
        check_columns(named, source.columns)
        for arg, column in [("sequence_by", spec.sequence_by),
                            ("apply_as_deletes", spec.apply_as_deletes),
                            ("apply_as_truncates", spec.apply_as_truncates)]:
            if column is not None:
                _analyze_expression(spec, source, arg, column)
        return self.spark.createDataFrame([], scd_type_of(spec).target_schema(named, source))

    def _snapshot_cdc(self, spec: SnapshotCdcSpec) -> DataFrame:
        """The first snapshot's query (the function asked as before a first update, or the
        table read), checked as an update checks it; reading a snapshot's rows is left out."""
        function = spec.source_function
        latest = self.stored.snapshot_version(spec.target) if self.stored else None
        stored = self.stored.schema(spec.target) if self.stored else None
        result = function(latest) if function is not None and self.ask_snapshots else None
        if function is not None and result is None and (latest is not None
                                                        or not self.ask_snapshots):
            if stored is None:
                raise _Blocked(spec.target)  # not analyzed: nothing stored to compare with
            return self.spark.createDataFrame([], stored)  # no new snapshot: the table stands
        if function is None:
            snapshot = snapshot_flow.table_snapshot(pipeline_session.current(self.spark),
                                                    str(spec.source), self.resolve)
            version: object = snapshot_flow.processing_time()
        else:
            if result is None:
                raise GraphError(f"AUTO CDC FROM SNAPSHOT flow `{spec.name}`: "
                                 f"{snapshot_flow.asked(spec, None)} returned None: there is no "
                                 "first snapshot, and an update would fail")
            snapshot, version = snapshot_flow.check_shape(spec, latest, result)
            snapshot_versions.check_next(spec.name, snapshot_flow.asked(spec, latest), version,
                                         latest)
        snapshot_flow.check_columns(snapshot_flow.snapshot_named(spec, snapshot.columns),
                                    snapshot.columns)
        return self.spark.createDataFrame([], target_schema(
            snapshot.schema, spec.stored_as_scd_type, snapshot_versions.spark_type(version)))

    # -- reads inside a flow's query ---------------------------------------------------------------
    def resolve(self, text: str, streaming: bool, options: Mapping[str, str] = NO_OPTIONS
                ) -> DataFrame | None:
        # The reader's options change which rows a read gives; of their schema, only a change
        # feed's columns (`readChangeFeed`), which the empty input of a dataset gets too.
        name = text if self.scope is None else \
            (self.scope.dataset(text, self.graph.outputs) or text)
        if self.reading:
            self.reads[self.reading[-1]].append(Read(name, streaming))
        if name not in self.graph.outputs and self.scope is not None:
            return self._external(text, streaming, options)
        if name not in self.graph.outputs:
            if not self.spark.catalog.tableExists(name):
                raise GraphError(f"reads `{name}`, which no pipeline file defines (datasets: "
                                 f"{', '.join(self.graph.outputs)})")
            return None  # a table of the catalog, read as it is
        if self.graph.sink(name) is not None:
            raise GraphError(f"`{name}` is a sink: the pipeline writes it, and cannot read it")
        if self.graph.is_view(name):  # inlined into the reader, as an update does
            return self._inline_view(name)
        # In the reading flow's session: what it builds on the read is analyzed there.
        return _empty(pipeline_session.current(self.spark), _as_read(self.dataset(name), options),
                      streaming)


def analyze(spark: SparkSession, settings: Settings | None, files: Sequence[Path],
            warehouse: Warehouse | None = None, scope: ReadScope | None = None,
            configuration: Mapping[str, str] | None = None,
            root_path: Path | None = None) -> Analysis:
    """Load `files` and analyze every dataset's query, collecting the problems; the settings'
    pipeline configuration (and `configuration` over it) is in the session meanwhile, as in an
    update. `warehouse`: the one the next update writes, whose snapshot versions say what its
    snapshot functions are asked (none: as before a first update). `scope`: the pipeline's
    catalog and schema, and the local catalog its reads of other tables resolve in (read,
    never written); `root_path`: a folder its code imports from."""
    parameters = dict(configuration or {})
    if settings is not None:
        for key, value in settings.to_conf().items():
            spark.conf.set(key, value)  # as run_pipeline: where pipeline code reads settings
        parameters = {**settings.configuration, **parameters}
    if scope is not None:
        scope.catalog.attach(spark, scope.namespace, seed=False)
    with update_settings.configured(spark, parameters), \
            (importable(root_path) if root_path else nullcontext()):
        graph, problems = _load(spark, files, scope.namespace if scope else Namespace())
        if scope is not None:
            try:
                scope.catalog.refuse_fixtures_over(scope.namespace, graph.outputs)
            except CatalogError as err:
                problems.append(Problem(str(err)))
            try:  # the name the bundle publishes the event log under, as an update checks it
                scope.published_event_log([table.name for table in graph.tables()])
            except CatalogError as err:
                problems.append(Problem(str(err)))
        stored = None
        if warehouse is not None:
            try:  # where each table is stored (a declared `path`), as an update finds it
                stored = StoredTables(warehouse.declaring(graph.definitions()))
            except DeclarationError as err:
                problems.append(Problem.of(err))
        analysis = analyze_graph(spark, graph, problems, stored, scope=scope)
    analysis.files = list(files)
    return analysis


def analyze_graph(spark: SparkSession, graph: PipelineGraph, problems: Sequence[Problem] = (),
                  stored: StoredTables | None = None, ask_snapshots: bool = True,
                  scope: ReadScope | None = None) -> Analysis:
    """Analyze every dataset's query of a loaded graph (its pipeline settings and
    configuration in `spark`'s conf), collecting the problems; `problems`: those found loading
    it. `stored`: the warehouse's tables, so an AUTO CDC FROM SNAPSHOT function is asked with
    the version the next update asks it (None only before the first); `ask_snapshots` False
    when it must not be asked at all (an update's check and `rederive`: asking is the update's,
    with the version it has applied): such a flow writes its target's stored schema. `scope`:
    what names outside the pipeline resolve to (catalog/scope.py)."""
    analyzer = _Analyzer(spark, graph, graph.declared_in, stored, ask_snapshots, scope)
    # A dataset with a problem of its declaration is not analyzed: its problem is reported.
    analyzer.failed.update(p.dataset for p in problems if p.dataset)
    with quiet_query_context(), resolved_reads(analyzer.resolve), \
            resolved_sql(analyzer.resolve):
        for name in graph.outputs:
            try:
                analyzer.dataset(name)
            except _Blocked:
                pass
    return Analysis(graph, _dataflow(graph, analyzer.reads, graph.declared_in,
                                     analyzer.batch_tables),
                    [*problems, *analyzer.problems], schemas=analyzer.flow_schemas,
                    warnings=[Problem(message, graph.declared_in.get(table), table)
                              for table, message in graph.wall_clock_warnings()])


def _load(spark: SparkSession, files: Sequence[Path], namespace: Namespace
          ) -> tuple[PipelineGraph, list[Problem]]:
    """Every file run on its own (one that fails does not hide the others), then every problem
    of the graph's own checks, but one about a dataset whose declaration failed already."""
    graph, problems = PipelineGraph(namespace=namespace), []
    with graph_element_registration_context(graph), dp_extensions.installed(graph):
        for path in files:
            try:
                run_file(spark, graph, path)
            except DeclarationError as err:  # an import error, a bad declaration...
                problems.append(Problem.of(err))
    try:
        graph.complete()
    except DeclarationError:
        reported = {p.dataset for p in problems if p.dataset}
        problems += [Problem.of(e) for e in graph.problems() if e.dataset not in reported]
    return graph, problems


def _dataflow(graph: PipelineGraph, reads: dict[str, list[Read]],
              declared_in: dict[str, str], batch_tables: set[str]) -> Dataflow:
    """The graph as analyzed: `batch_tables`, `@dp.table`s whose query is a batch read, are
    materialized views."""
    def flow_kind(flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> str:
        kind = base_kind(flow)
        return f"{kind} once" if is_once(flow) else kind

    def base_kind(flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> str:
        if isinstance(flow, AutoCdcSpec):
            return auto_cdc_kind(flow)
        if isinstance(flow, SnapshotCdcSpec):
            return flow.kind()
        if graph.is_materialized_view(flow.target) or flow.target in batch_tables:
            return MATERIALIZED_VIEW
        return VIEW if graph.is_view(flow.target) else APPEND

    return Dataflow(
        datasets=[DatasetNode(name, MATERIALIZED_VIEW if name in batch_tables
                              else dataset_kind(output), declared_in.get(name, "?"))
                  for name, output in graph.outputs.items()],
        flows=[FlowNode(f.name, f.target, flow_kind(f),
                        tuple(dict.fromkeys(reads.get(f.name, []))), declared_in.get(f.name, "?"),
                        _outside_source(f), getattr(f, "comment", None) or "")
               for name in graph.outputs for f in graph.flows_into(name)],
    )


def _outside_source(flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> str:
    """What a flow reads from outside the pipeline, when a graph can name it: the function of
    a snapshot flow."""
    if isinstance(flow, SnapshotCdcSpec) and flow.source_table is None:
        return flow.source_label()
    return ""


def _as_read(schema: StructType, options: Mapping[str, str]) -> StructType:
    """A table's schema as a read with `options` gives it: a change feed's adds its columns."""
    if {k.lower(): str(v).lower() for k, v in options.items()}.get("readchangefeed") == "true":
        return StructType([*schema.fields, *CHANGE_FEED_COLUMNS])
    return schema


def _empty(spark: SparkSession, schema: StructType, streaming: bool) -> DataFrame:
    """No rows, `schema`'s columns. A stream: the rate source (never started) projected onto
    typed NULLs, which is analyzed like any stream and reads nothing."""
    if not streaming:
        return spark.createDataFrame([], schema)
    return spark.readStream.format("rate").load().select(
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])


def _check_expectation(df: DataFrame, expectation: Expectation) -> None:
    """The constraint parses, analyzes against the flow's query and is a boolean."""
    try:
        (field,) = df.select(F.expr(expectation.constraint)).schema.fields
    except Exception as err:  # noqa: BLE001
        raise GraphError(f"expectation `{expectation.name}` ({expectation.constraint!r}) does "
                         f"not analyze: {first_line(err)}") from None
    if not isinstance(field.dataType, BooleanType):
        raise GraphError(f"expectation `{expectation.name}` ({expectation.constraint!r}) is not "
                         f"a condition: its type is {field.dataType.simpleString()}")


def _analyze_expression(spec: AutoCdcSpec, source: DataFrame, arg: str, column: Column) -> None:
    try:
        _ = source.select(column).schema  # analysis is the point
    except Exception as err:  # noqa: BLE001
        raise GraphError(f"AUTO CDC flow `{spec.name}`: {arg} does not analyze against "
                         f"`{spec.source}`: {first_line(err)}") from None

