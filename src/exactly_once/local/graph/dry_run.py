"""`exactly-once dry-run`: the pipeline checked without reading or writing any data.

As `spark-pipelines dry-run` (and `databricks bundle run --validate-only`): every pipeline file
runs, the graph is validated (names, flows, targets), and each flow's query is built and
analyzed, so an unknown dataset or column, a type error or an expectation that is not SQL is
found before an update starts. Reads of pipeline datasets inside a flow are answered with an
empty DataFrame of that dataset's schema (a never-started stream for streaming reads), so the
datasets are analyzed upstream first and no table, checkpoint or Kafka topic is touched. The
Kafka source itself is only declared, never started: declaring it reads nothing.

Problems are collected, not raised: one per file that fails to run, per graph rule broken and
per dataset whose query does not analyze. A dataset that reads a broken one is not analyzed
(its problem is upstream).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.pipelines.flow import Flow
from pyspark.pipelines.graph_element_registry import graph_element_registration_context
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructType

from exactly_once.errors import DeclarationError, GraphError, first_line, located
from exactly_once.local.auto_cdc.changes import check_columns
from exactly_once.local.auto_cdc.from_snapshot import flow as snapshot_flow
from exactly_once.local.auto_cdc.from_snapshot import versions as snapshot_versions
from exactly_once.local.auto_cdc.from_snapshot.apply import target_schema
from exactly_once.local.auto_cdc.from_snapshot.spec import SnapshotCdcSpec
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.auto_cdc.writer import scd_type_of
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
from exactly_once.local.graph.expectations import Expectation, apply_expectations, declared
from exactly_once.local.graph.loader import run_file
from exactly_once.local.graph.reads import resolved_reads
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.settings.pipeline import Settings

# pyspark logs each analysis error with its DataFrame context before raising it: the problem
# line says it already.
_QUERY_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


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

    @property
    def ok(self) -> bool:
        return not self.problems


class _Blocked(Exception):
    """A read of a dataset whose problem is already reported: stop analyzing the reader."""


class _Analyzer:
    def __init__(self, spark: SparkSession, graph: PipelineGraph, declared_in: dict[str, str]):
        self.spark, self.graph, self.declared_in = spark, graph, declared_in
        self.problems: list[Problem] = []
        self.schemas: dict[str, StructType] = {}
        self.failed: set[str] = set()
        self.stack: list[str] = []  # datasets being analyzed, outermost first
        self.reads: dict[str, list[Read]] = {}  # flow -> what its query read
        self.flow_schemas: dict[str, StructType] = {}  # flow -> what its query writes
        self.reading: list[str] = []  # flows whose queries are being built, innermost last

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
        schema = None
        for flow in self.graph.flows_into(name):
            df = self.query(flow)
            self.flow_schemas[flow.name] = df.schema
            schema = schema or df.schema
        if schema is None:
            raise GraphError(f"dataset `{name}` has no flow")
        return schema

    def query(self, flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> DataFrame:
        """The flow's query, analyzed, with the reads it makes recorded."""
        self.reads.setdefault(flow.name, [])
        self.reading.append(flow.name)
        try:
            if isinstance(flow, AutoCdcSpec):
                return self._auto_cdc(flow)
            if isinstance(flow, SnapshotCdcSpec):
                return self._snapshot_cdc(flow)
            df = flow.func()
            for e in declared(flow.func):
                _check_expectation(df, e)
            df, _ = apply_expectations(df, declared(flow.func), flow.target)
            _ = df.schema  # analysis is the point
            return df
        finally:
            self.reading.pop()

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
        source = self.resolve(spec.source, streaming=True)
        if source is None:
            raise GraphError(f"AUTO CDC flow `{spec.name}` reads `{spec.source}`, which the "
                             "pipeline does not define")
        check_columns(spec, source.columns)
        for arg, column in [("sequence_by", spec.sequence_by),
                            ("apply_as_deletes", spec.apply_as_deletes),
                            ("apply_as_truncates", spec.apply_as_truncates)]:
            if column is not None:
                _analyze_expression(spec, source, arg, column)
        return self.spark.createDataFrame([], scd_type_of(spec).target_schema(spec, source))

    def _snapshot_cdc(self, spec: SnapshotCdcSpec) -> DataFrame:
        """The first snapshot's query (the function asked as before a first update, or the
        table read), checked as an update checks it; reading a snapshot's rows is left out."""
        function = spec.source_function
        if function is None:
            snapshot = snapshot_flow.table_snapshot(self.spark, str(spec.source), self.resolve)
            version: object = snapshot_flow.processing_time()
        else:
            result = function(None)
            if result is None:
                raise GraphError(f"AUTO CDC FROM SNAPSHOT flow `{spec.name}`: "
                                 f"{snapshot_flow.asked(spec, None)} returned None: there is no "
                                 "first snapshot, and an update would fail")
            snapshot, version = snapshot_flow.check_shape(spec, None, result)
            snapshot_versions.check_next(spec.name, snapshot_flow.asked(spec, None), version,
                                         None)
        snapshot_flow.check_columns(spec, snapshot.columns)
        return self.spark.createDataFrame([], target_schema(
            snapshot.schema, spec.stored_as_scd_type, snapshot_versions.spark_type(version)))

    # -- reads inside a flow's query ---------------------------------------------------------------
    def resolve(self, name: str, streaming: bool) -> DataFrame | None:
        if self.reading:
            self.reads[self.reading[-1]].append(Read(name, streaming))
        if name not in self.graph.outputs:
            if not self.spark.catalog.tableExists(name):
                raise GraphError(f"reads `{name}`, which no pipeline file defines (datasets: "
                                 f"{', '.join(self.graph.outputs)})")
            return None  # a table of the catalog, read as it is
        if self.graph.is_view(name):  # inlined into the reader, as an update does
            return self._inline_view(name)
        return _empty(self.spark, self.dataset(name), streaming)


def analyze(spark: SparkSession, settings: Settings, files: Sequence[Path]) -> Analysis:
    """Load `files` and analyze every dataset's query, collecting the problems."""
    for key, value in settings.to_conf().items():
        spark.conf.set(key, value)  # as run_pipeline: what pipeline code reads its settings from
    graph, problems = _load(spark, files)
    analysis = analyze_graph(spark, graph, problems)
    analysis.files = list(files)
    return analysis


def analyze_graph(spark: SparkSession, graph: PipelineGraph,
                  problems: Sequence[Problem] = ()) -> Analysis:
    """Analyze every dataset's query of a loaded graph (its pipeline settings in `spark`'s
    conf), collecting the problems; `problems`: those found loading it."""
    analyzer = _Analyzer(spark, graph, graph.declared_in)
    # A dataset with a problem of its declaration is not analyzed: its problem is reported.
    analyzer.failed.update(p.dataset for p in problems if p.dataset)
    with quiet_analysis_errors(), resolved_reads(analyzer.resolve):
        for name in graph.outputs:
            try:
                analyzer.dataset(name)
            except _Blocked:
                pass
    return Analysis(graph, _dataflow(graph, analyzer.reads, graph.declared_in),
                    [*problems, *analyzer.problems], schemas=analyzer.flow_schemas)


def _load(spark: SparkSession, files: Sequence[Path]) -> tuple[PipelineGraph, list[Problem]]:
    """Every file run on its own (one that fails does not hide the others), then every problem
    of the graph's own checks, but one about a dataset whose declaration failed already."""
    graph, problems = PipelineGraph(), []
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
              declared_in: dict[str, str]) -> Dataflow:
    def flow_kind(flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> str:
        if isinstance(flow, AutoCdcSpec):
            return auto_cdc_kind(flow)
        if isinstance(flow, SnapshotCdcSpec):
            return flow.kind()
        if graph.is_materialized_view(flow.target):
            return MATERIALIZED_VIEW
        return VIEW if graph.is_view(flow.target) else APPEND

    return Dataflow(
        datasets=[DatasetNode(name, dataset_kind(output), declared_in.get(name, "?"))
                  for name, output in graph.outputs.items()],
        flows=[FlowNode(f.name, f.target, flow_kind(f),
                        tuple(dict.fromkeys(reads.get(f.name, []))), declared_in.get(f.name, "?"),
                        _outside_source(f))
               for name in graph.outputs for f in graph.flows_into(name)],
    )


def _outside_source(flow: Flow | AutoCdcSpec | SnapshotCdcSpec) -> str:
    """What a flow reads from outside the pipeline, when a graph can name it: the function of
    a snapshot flow."""
    if isinstance(flow, SnapshotCdcSpec) and flow.source_table is None:
        return flow.source_label()
    return ""


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


@contextmanager
def quiet_analysis_errors() -> Iterator[None]:
    """pyspark's own log lines for the analysis errors raised inside the block (each is raised,
    and said once by whoever catches it), off. The loggers are the process's: blocks in
    several threads at once (an update's tables) turn them back on when the last one ends."""
    global _quiet_blocks
    loggers = [logging.getLogger(name) for name in _QUERY_CONTEXT_LOGGERS]
    with _quiet_lock:
        if _quiet_blocks == 0:
            _saved_states[:] = [logger.disabled for logger in loggers]
            for logger in loggers:
                logger.disabled = True
        _quiet_blocks += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_blocks -= 1
            if _quiet_blocks == 0:
                for logger, was in zip(loggers, _saved_states, strict=True):
                    logger.disabled = was


_quiet_lock = threading.Lock()
_quiet_blocks = 0  # blocks of quiet_analysis_errors running
_saved_states: list[bool] = []  # the loggers' `disabled` before the first of them
