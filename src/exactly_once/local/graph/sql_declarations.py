"""A pipeline SQL file run as Databricks runs it: each statement becomes the declaration the
Python API makes (`dp.create_streaming_table`, `dp.materialized_view`, `dp.temporary_view`,
`dp.append_flow`, `dp.create_auto_cdc_flow`, the expectation decorators), whose query function
builds the statement's query (sql_queries.py), so the update, dry-run, the graph, expectations
and AUTO CDC treat a SQL dataset as a Python one; SQL and Python datasets read each other.

Each declaration is located at the statement (`<file>:<line>`, in messages, `dry-run`, `graph`
and the registry's source locations). `SET key = value` gives the flows declared after it in
the same file that Spark setting (their `spark_conf`), as open-source pipelines do; an AUTO CDC
flow has none, so a SET before one is refused. `USE CATALOG` and `USE SCHEMA` set the file's
current catalog and schema for the statements after it, as on Databricks (`_named_in`).

The statements a pipeline SQL file holds: https://docs.databricks.com/aws/en/ldp/developer/sql-ref
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import DeclarationError
from exactly_once.local.auto_cdc.spec import AutoCdcDeclarations
from exactly_once.local.catalog.names import LIVE, Namespace, NameSyntaxError, split
from exactly_once.local.graph import dataset_declarations, expectations, source_locations
from exactly_once.local.graph.expectations import DROP, FAIL, WARN
from exactly_once.local.graph.flow_declarations import FlowDeclarations
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.graph.sql_auto_cdc import AutoCdc
from exactly_once.local.graph.sql_files import Statement, statements, substituted
from exactly_once.local.graph.sql_queries import Query
from exactly_once.local.graph.sql_statements import (
    MATERIALIZED_VIEW,
    STREAMING_TABLE,
    TEMPORARY_VIEW,
    VIEW,
    Dataset,
    Declared,
    InsertFlow,
    SetConf,
    parse,
)
from exactly_once.local.graph.sql_use import Use

_EXPECT = {WARN: expectations.expect, DROP: expectations.expect_or_drop,
           FAIL: expectations.expect_or_fail}


def run_sql_file(spark: SparkSession, graph: PipelineGraph, path: Path, shown: str,
                 text: str | None = None) -> None:
    """Declare in `graph` what SQL file `path` (`shown` as messages name it; `text`: its
    source, when not the file's own text, a notebook's) declares, statement by statement; the
    first statement the runtime cannot run raises its one-line error, which the loader locates
    at `graph.loading`, the statement's file and line."""
    conf: dict[str, str] = {}
    namespace = graph.namespace  # the file's current catalog and schema (USE)
    for written in statements(spark, path.read_text() if text is None else text):
        graph.loading = f"{shown}:{written.line}"
        with source_locations.sql_statement(str(path), written.line):
            statement = substituted(spark, written)
            declared = parse(spark, statement)
            if isinstance(declared, Use):
                namespace = declared.applied_to(namespace)
                continue
            if namespace != graph.namespace:
                declared = _named_in(declared, namespace, graph)
            conf = _declare(graph, statement, declared, conf)


def _named_in(declared: Declared, namespace: Namespace, graph: PipelineGraph) -> Declared:
    """`declared` with the names of one or two parts it declares and reads read against
    `namespace`, a USE's, written in full: the graph reads them against the pipeline's
    (registry.py). A temporary view's own name stays as written (it is the pipeline's, in
    no schema), and so does a read of one the pipeline declared before (Spark reads a
    temporary view first)."""
    def full(name: str) -> str:
        try:
            parts = split(name)
        except NameSyntaxError:
            return name
        if len(parts) == 3 or (len(parts) == 2 and parts[0].lower() == LIVE):
            return name
        return str(namespace.qualify(parts))

    def query(written: Query) -> Query:
        return replace(written, reads=tuple(
            read if read.files is not None or graph.is_view(read.name) else
            replace(read, name=full(read.name)) for read in written.reads))

    if isinstance(declared, AutoCdc):
        arguments = dict(declared.arguments)
        if arguments["name"] == arguments["target"]:
            arguments["name"] = full(arguments["target"])
        arguments.update(target=full(arguments["target"]), source=full(arguments["source"]))
        return replace(declared, arguments=arguments)
    if isinstance(declared, InsertFlow):
        return replace(declared, target=full(declared.target), query=query(declared.query))
    if isinstance(declared, Dataset):
        return replace(declared, query=None if declared.query is None else query(declared.query),
                       name=declared.name if declared.kind == TEMPORARY_VIEW
                       else full(declared.name))
    return declared


def _declare(graph: PipelineGraph, statement: Statement, declared: Declared,
             conf: dict[str, str]) -> dict[str, str]:
    """Register what `declared` declares, with `conf` for its flow; the conf for the next."""
    flows = FlowDeclarations(graph.register_flow, graph.register_output)
    if isinstance(declared, SetConf):
        return {**conf, declared.key: declared.value}
    if isinstance(declared, AutoCdc):
        if conf:
            raise statement.error(f"SET {', '.join(conf)}: an AUTO CDC flow has no Spark "
                                  "settings of its own locally", dataset=declared.target)
        comment = declared.comment
        AutoCdcDeclarations(lambda spec: graph.register_auto_cdc_spec(
            replace(spec, comment=comment))).create_auto_cdc_flow(**declared.arguments)
    elif isinstance(declared, InsertFlow):
        flows.append_flow(target=declared.target, name=declared.name, once=declared.once,
                          spark_conf=conf, comment=declared.comment,
                          )(_function(declared.query, declared.target,
                                      streams=None if declared.once else True))
    elif declared.kind == STREAMING_TABLE:
        _streaming_table(declared, conf, flows)
    elif declared.kind == MATERIALIZED_VIEW:
        assert declared.query is not None
        _declarator(dataset_declarations.materialized_view(
            name=declared.name, comment=declared.comment, spark_conf=conf,
            table_properties=declared.properties, path=declared.path,
            partition_cols=declared.partition_cols, cluster_by=declared.cluster_by,
            schema=declared.schema, private=declared.private,
        ))(_function(declared.query, declared.name, declared, streams=False))
    elif declared.kind == VIEW:
        _published_view(statement, declared, conf)
    else:
        assert declared.query is not None
        _declarator(dataset_declarations.temporary_view(
            name=declared.name, comment=declared.comment, spark_conf=conf,
        ))(_function(declared.query, declared.name))
    return conf


def _streaming_table(declared: Dataset, conf: dict[str, str], flows: FlowDeclarations) -> None:
    """The table, its expectations on every flow into it (as `create_streaming_table`'s
    expect_all*), and its query, when it has one, as its flow of its name."""
    rules: dict[str, dict[str, str]] = {WARN: {}, DROP: {}, FAIL: {}}
    for expectation in declared.expectations:
        rules[expectation.action][expectation.name] = expectation.constraint
    dataset_declarations.create_streaming_table(
        declared.name, comment=declared.comment, table_properties=declared.properties,
        path=declared.path, partition_cols=declared.partition_cols,
        cluster_by=declared.cluster_by, schema=declared.schema, expect_all=rules[WARN] or None,
        expect_all_or_drop=rules[DROP] or None, expect_all_or_fail=rules[FAIL] or None,
        private=declared.private)
    if declared.query is not None:
        flows.append_flow(target=declared.name, name=declared.name,
                          spark_conf=conf)(_function(declared.query, declared.name, streams=True))


def _published_view(statement: Statement, declared: Dataset, conf: dict[str, str]) -> None:
    """CREATE VIEW: a view the pipeline's queries inline, published after each update."""
    assert declared.query is not None
    definition = declared.query.published_text()
    if definition is None:
        raise statement.error("a CREATE VIEW reads tables and views (Databricks: \"views cannot "
                              "have streaming queries\"); a view over read_files is not "
                              "supported by the local runtime, declare a materialized view",
                              dataset=declared.name)
    dataset_declarations.published_view(
        declared.name, comment=declared.comment, table_properties=declared.properties,
        definition=definition, reads=declared.query.read_names(), spark_conf=conf,
    )(_function(declared.query, declared.name, streams=False))


def _declarator(decorator: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """What `@dp.materialized_view(...)` returns when given arguments: its decorator."""
    assert decorator is not None
    return decorator


def _function(query: Query, target: str, declared: Dataset | None = None,
              streams: bool | None = None) -> Callable[[], DataFrame]:
    """The flow function of `query` into `target`; with the dataset's expectations, in the
    order written. `streams`: whether the query must be a stream (a streaming table's, a flow's
    without ONCE: "the query must be a streaming query"), a batch (a materialized view's), or
    either (a view's, a ONCE flow's, whose own check is the runtime's)."""
    def sql_query() -> DataFrame:
        df = query.build()
        if streams is True and not df.isStreaming:
            raise DeclarationError(f"`{target}` is written by a streaming query: read its "
                                   "sources with STREAM(name) (a flow that reads a batch is "
                                   "INSERT INTO ONCE)", dataset=target)
        if streams is False and df.isStreaming:
            raise DeclarationError(f"materialized view `{target}` reads batches: FROM name, "
                                   "not STREAM(name)", dataset=target)
        return df

    function: Any = sql_query
    for expectation in reversed(declared.expectations if declared else ()):
        function = _EXPECT[expectation.action](expectation.name, expectation.constraint)(function)
    return function
