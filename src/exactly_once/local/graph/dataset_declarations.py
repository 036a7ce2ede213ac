"""Databricks' dataset declarations for local runs: `dp.table`, `dp.materialized_view`,
`dp.temporary_view` and `dp.create_streaming_table` with the signatures Databricks documents:

  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-table
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-materialized-view
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-view
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-streaming-table

pyspark 4.2's own versions lack `path`, `private`, `cluster_by_auto`, `row_filter`,
`refresh_policy` and `create_streaming_table`'s `spark_conf` and `expect_all*`; while pipeline
files load, `dp_extensions.installed` puts these on `pyspark.pipelines` instead. They register
pyspark's own outputs (the runtime and its tests check those classes), as subclasses carrying
what Databricks adds, and pyspark's `Flow` (`spark_conf` on it, for the flow's session).

Each argument either reaches the table (storage/table_definition.py: comment, properties,
partitioning, clustering, a declared schema with column comments, NOT NULL and generated columns,
the storage `path`; `private`: not published in the session catalog) or is refused here, in one
line naming the dataset: what needs Unity Catalog (row filters, column masks, primary and foreign
keys), what open-source Delta lacks (automatic liquid clustering), and what the local runtime does
not do (incremental refresh policies, column defaults, CHECK constraints, an identity column
other than BIGINT).
`@dp.table` over a batch query makes a materialized view, as Databricks' `table` reference says
(`DeclaredStreamingTable.query_decides_kind`; open-source pipelines refuse it): the update and
dry-run decide it once the query is built.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import AnalysisException, ParseException
from pyspark.pipelines.flow import Flow
from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry
from pyspark.pipelines.output import MaterializedView, StreamingTable, TemporaryView
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql.types import LongType, StructField, StructType

from exactly_once.errors import DeclarationError, GraphError, first_line
from exactly_once.local.engine.sql_parser import (
    ColumnDefinition,
    parse_table_schema,
    quiet_query_context,
)
from exactly_once.local.graph import source_locations
from exactly_once.local.graph.expectations import DROP, FAIL, WARN, Expectation
from exactly_once.local.storage.table_definition import COMMENT, GENERATED, identity_metadata

QueryFunction = Callable[[], Any]
Decorator = Callable[[QueryFunction], None]
REFRESH_POLICIES = ("auto", "incremental", "incremental_strict", "full")
RECOMPUTED = ("auto", "full")  # what a full recompute at each update is
# Table properties Spark keeps for itself (TableCatalog's reserved properties): the table's
# comment, location and owner come from the declaration's arguments and the catalog.
RESERVED_PROPERTIES = ("comment", "location", "provider", "owner", "external",
                       "is_managed_location")


@dataclass(frozen=True, kw_only=True)
class DatabricksArguments:
    """What Databricks' table declarations take beyond pyspark's `Table`."""

    path: str | None = None  # stored there instead of in the warehouse
    private: bool = False  # read by the pipeline, not published in the catalog


@dataclass(frozen=True, kw_only=True)
class DeclaredStreamingTable(StreamingTable, DatabricksArguments):
    """`@dp.table` or `dp.create_streaming_table`."""

    # @dp.table: a batch query makes it a materialized view (Databricks' `table` reference).
    query_decides_kind: bool = False
    # create_streaming_table's expect_all*, applied to every flow into the table, and its
    # spark_conf, under each flow's own (PipelineGraph.complete).
    expectations: tuple[Expectation, ...] = ()
    spark_conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class DeclaredMaterializedView(MaterializedView, DatabricksArguments):
    """`@dp.materialized_view`."""

    # `full`: recomputed at every update, even when nothing it reads changed (execution/
    # unchanged.py skips the others then).
    refresh_policy: str = "auto"


@dataclass(frozen=True, kw_only=True)
class PublishedView(TemporaryView):
    """SQL's `CREATE VIEW` (https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-view):
    in the pipeline a view as a temporary view is, inlined into each query that reads it; after
    an update it is also published in the session catalog as a view over the tables it reads
    (`definition`, its query with each read named as published), with its comment and
    properties."""

    table_properties: Mapping[str, str] = field(default_factory=dict)
    definition: str = ""
    reads: tuple[str, ...] = ()  # the pipeline datasets or catalog tables it reads


@dataclass(frozen=True)
class _Declaring:
    """One call of a declaration, for its one-line errors: `table: <what is wrong>`."""

    function: str
    dataset: str

    def error(self, message: str) -> DeclarationError:
        return DeclarationError(f"{self.function}: {message}", dataset=self.dataset)

    def strings(self, argument: str, value: object) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(f"{argument} must be a dict, got {type(value).__name__}")
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                raise self.error(f"{argument} takes strings: {key!r} is {item!r}")
        return dict(value)

    def names(self, argument: str, value: object) -> list[str] | None:
        if value is None:
            return None
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self.error(f"{argument} must be a list of column names, got {value!r}")
        return list(value)

    def text(self, argument: str, value: object) -> str | None:
        if value is not None and not isinstance(value, str):
            raise self.error(f"{argument} must be a str, got {type(value).__name__}")
        return value

    def flag(self, argument: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.error(f"{argument} must be True or False, got {value!r}")
        return value


def _dataset(function: str, name: object, decorated: object) -> str:
    if name is not None and not isinstance(name, str):
        raise DeclarationError(f"{function}: name must be a str, got {type(name).__name__}")
    if not callable(decorated):
        raise DeclarationError(f"@dp.{function} decorates the function that returns the "
                               f"dataset's query, got {decorated!r}", dataset=name)
    return name or str(getattr(decorated, "__name__", decorated))


def _table_arguments(declaring: _Declaring, *, comment: object, table_properties: object,
                     path: object, partition_cols: object, cluster_by_auto: object,
                     cluster_by: object, schema: object, row_filter: object,
                     private: object, format: object = None) -> dict[str, Any]:
    """The keyword arguments of a table output, checked; what cannot run locally refused.
    `format` is pyspark's own argument: a pipeline's tables are Delta tables."""
    if format is not None and str(format).lower() != "delta":
        raise declaring.error(f"format {format}: a pipeline's tables are Delta tables")
    if row_filter is not None:
        raise declaring.error("row_filter needs a Unity Catalog function, which the local "
                              "runtime does not have")
    partitions = declaring.names("partition_cols", partition_cols)
    clustering = declaring.names("cluster_by", cluster_by)
    # cluster_by_auto with cluster_by: those are the initial keys, which Databricks' predictive
    # optimization may change later (a layout, never the rows); locally they stay. Alone there
    # are no keys to start from, and nothing here would ever choose them.
    if declaring.flag("cluster_by_auto", cluster_by_auto) and not clustering:
        raise declaring.error("cluster_by_auto=True without cluster_by: automatic key selection "
                              "is Databricks' predictive optimization, which the local runtime "
                              "does not have; give the initial keys with cluster_by")
    if partitions and clustering:
        raise declaring.error("give partition_cols or cluster_by, not both")
    location = declaring.text("path", path)
    if location is not None and not (os.path.isabs(location) or location.startswith("s3a://")):
        raise declaring.error("path must be an absolute location (a directory or an s3a:// "
                              f"URI), got {location!r}")
    declared = _schema(declaring, schema)
    if declared is not None:
        names = {f.name.lower() for f in declared.fields}
        for argument, columns in (("partition_cols", partitions), ("cluster_by", clustering)):
            for column in columns or ():
                if column.lower() not in names:
                    raise declaring.error(f"{argument} names `{column}`, which its schema lacks")
    properties = declaring.strings("table_properties", table_properties)
    for key in properties:
        if key.lower() in RESERVED_PROPERTIES:
            raise declaring.error(f"table_properties: `{key}` is reserved: Spark sets it")
    return {"name": declaring.dataset, "comment": declaring.text("comment", comment),
            "table_properties": properties,
            "partition_cols": partitions, "cluster_by": clustering, "schema": declared,
            "format": None, "path": location, "private": declaring.flag("private", private)}


def _schema(declaring: _Declaring, schema: object) -> StructType | None:
    """A declared schema as the table's StructType: a column's comment and generation
    expression in its metadata, as Delta keeps them (storage/table_definition.py)."""
    if schema is None or isinstance(schema, StructType):
        return schema
    if not isinstance(schema, str):
        raise declaring.error(f"schema must be a DDL string or a StructType, got "
                              f"{type(schema).__name__}")
    try:
        parsed = parse_table_schema(schema)
    except ParseException as err:
        if re.search(r"\bMASK\b", schema, re.IGNORECASE):
            raise declaring.error("schema: column masks (MASK) need Unity Catalog functions, "
                                  "which the local runtime does not have") from None
        plain = _plain_parse_error(schema, err)
        raise declaring.error(f"schema does not parse: {first_line(plain)}") from None
    if {"PrimaryKey", "ForeignKey"} & set(parsed.constraints):
        raise declaring.error("schema: PRIMARY KEY and FOREIGN KEY constraints are Unity "
                              "Catalog's, which the local runtime does not have")
    if "Check" in parsed.constraints:
        raise declaring.error("schema: CHECK constraints are not supported by the local "
                              "runtime; declare the rule as an expectation (dp.expect_or_fail)")
    for kind in parsed.constraints:
        raise declaring.error(f"schema: {kind} constraints are not supported by the local "
                              "runtime")
    for column in parsed.columns:
        _check_identity(declaring, column)
        if column.default:
            raise declaring.error("schema: column defaults (DEFAULT) are not supported by the "
                                  "local runtime")
    declared = StructType([
        StructField(c.name, c.data_type, c.nullable,
                    {**({COMMENT: c.comment} if c.comment is not None else {}),
                     **({GENERATED: c.generated} if c.generated is not None else {}),
                     **(identity_metadata(c.identity.start, c.identity.step, c.identity.always)
                        if c.identity is not None else {})})
        for c in parsed.columns])
    _check_generated(declaring, declared)
    return declared


def _check_identity(declaring: _Declaring, column: ColumnDefinition) -> None:
    """What open-source Delta refuses of an identity column (it has them since 3.3.0) that
    Spark's parser lets through: another type than BIGINT (the parser refuses a step of 0)."""
    if column.identity is not None and not isinstance(column.data_type, LongType):
        raise declaring.error(f"schema: identity column `{column.name}` is "
                              f"{column.data_type.simpleString().upper()}: Delta's identity "
                              "columns are BIGINT")


def _check_generated(declaring: _Declaring, schema: StructType) -> None:
    """Each generated column's expression analyzed against the other columns: Delta creates
    the table only when the expression's type is the column's (DELTA_GENERATED_COLUMNS_EXPR_TYPE_
    MISMATCH), which would otherwise fail the update mid-way rather than at load."""
    generated = [f for f in schema.fields if GENERATED in f.metadata]
    if not generated:
        return
    from pyspark.sql import SparkSession

    session: Any = SparkSession.active()
    plain = session.createDataFrame(
        [], StructType([f for f in schema.fields if GENERATED not in f.metadata]))
    for column in generated:
        expression = column.metadata[GENERATED]
        try:
            produced = plain.selectExpr(expression).schema.fields[0].dataType
        except AnalysisException as err:
            raise declaring.error(f"schema: generated column `{column.name}`: "
                                  f"{first_line(err)}") from None
        if produced != column.dataType:
            raise declaring.error(
                f"schema: generated column `{column.name}` is "
                f"{column.dataType.simpleString().upper()}, its expression ({expression}) "
                f"{produced.simpleString().upper()}: Delta needs the two to be one type; declare "
                f"the column {produced.simpleString().upper()}, or CAST the expression")


def _plain_parse_error(schema: str, err: ParseException) -> BaseException:
    """The parser's error about `schema` itself, positions counted in it: the plain schema
    parser's when it fails too (the CREATE TABLE statement `schema` was parsed in shifts
    them)."""
    from pyspark.sql import SparkSession

    if err.getCondition() != "PARSE_SYNTAX_ERROR":
        return err  # a rule of its own (an identity column's step of 0, say): its words
    session: Any = SparkSession.active()
    try:
        with quiet_query_context():
            session._jsparkSession.sessionState().sqlParser().parseTableSchema(schema)
    except ParseException as plain:
        return plain
    return err


def _flow(dataset: str, spark_conf: Mapping[str, str], location: SourceCodeLocation,
          function: QueryFunction) -> Flow:
    return Flow(name=dataset, target=dataset, spark_conf=dict(spark_conf),
                source_code_location=location, func=function)


def _decorator(query_function: QueryFunction | None, declare: Decorator) -> Decorator | None:
    """`@dp.x` applies `declare` to the function now; `@dp.x(...)` returns it."""
    if query_function is not None:
        declare(query_function)
        return None
    return declare


def table(query_function: QueryFunction | None = None, *, name: str | None = None,
          comment: str | None = None, spark_conf: dict[str, str] | None = None,
          table_properties: dict[str, str] | None = None, path: str | None = None,
          partition_cols: list[str] | None = None, cluster_by_auto: bool = False,
          cluster_by: list[str] | None = None, schema: StructType | str | None = None,
          row_filter: str | None = None, private: bool = False,
          replace_using: list[str] | None = None, sequence_by: object = None,
          format: str | None = None) -> Decorator | None:
    """A streaming table over a streaming query; over a batch query, a materialized view.
    `replace_using` and `sequence_by` (Beta: the table with its replace flow) are refused."""
    location = source_locations.caller(stacklevel=1)

    def declare(function: QueryFunction) -> None:
        declaring = _Declaring("table", _dataset("table", name, function))
        if replace_using is not None or sequence_by is not None:
            raise declaring.error("replace_using and sequence_by (Beta: a replace flow) are "
                                  "not supported by the local runtime")
        conf = declaring.strings("spark_conf", spark_conf)
        registry = get_active_graph_element_registry()
        registry.register_output(DeclaredStreamingTable(
            **_table_arguments(declaring, comment=comment, table_properties=table_properties,
                               path=path, partition_cols=partition_cols,
                               cluster_by_auto=cluster_by_auto, cluster_by=cluster_by,
                               schema=schema, row_filter=row_filter, private=private,
                               format=format),
            source_code_location=location, query_decides_kind=True))
        registry.register_flow(_flow(declaring.dataset, conf, location, function))

    return _decorator(query_function, declare)


def materialized_view(query_function: QueryFunction | None = None, *, name: str | None = None,
                      comment: str | None = None, spark_conf: dict[str, str] | None = None,
                      table_properties: dict[str, str] | None = None, path: str | None = None,
                      partition_cols: list[str] | None = None, cluster_by_auto: bool = False,
                      cluster_by: list[str] | None = None,
                      schema: StructType | str | None = None, refresh_policy: str | None = None,
                      row_filter: str | None = None,
                      private: bool = False, format: str | None = None) -> Decorator | None:
    """A materialized view: recomputed in full at each update, which is what the refresh
    policies `auto` (the default) and `full` allow."""
    location = source_locations.caller(stacklevel=1)

    def declare(function: QueryFunction) -> None:
        declaring = _Declaring("materialized_view", _dataset("materialized_view", name, function))
        conf = declaring.strings("spark_conf", spark_conf)
        if refresh_policy is not None:
            policy = str(refresh_policy).lower()
            if policy not in REFRESH_POLICIES:
                raise declaring.error("refresh_policy must be one of "
                                      f"{', '.join(map(repr, REFRESH_POLICIES))}; got "
                                      f"{refresh_policy!r}")
            if policy not in RECOMPUTED:
                raise declaring.error(f"refresh_policy={refresh_policy!r} is not supported by "
                                      "the local runtime, which recomputes a materialized view "
                                      "in full; use 'auto' or 'full'")
        registry = get_active_graph_element_registry()
        registry.register_output(DeclaredMaterializedView(
            **_table_arguments(declaring, comment=comment, table_properties=table_properties,
                               path=path, partition_cols=partition_cols,
                               cluster_by_auto=cluster_by_auto, cluster_by=cluster_by,
                               schema=schema, row_filter=row_filter, private=private,
                               format=format),
            refresh_policy=str(refresh_policy or "auto").lower(),
            source_code_location=location))
        registry.register_flow(_flow(declaring.dataset, conf, location, function))

    return _decorator(query_function, declare)


def temporary_view(query_function: QueryFunction | None = None, *, name: str | None = None,
                   comment: str | None = None,
                   spark_conf: dict[str, str] | None = None) -> Decorator | None:
    """A view of the pipeline: its query, inlined into each query that reads it."""
    location = source_locations.caller(stacklevel=1)

    def declare(function: QueryFunction) -> None:
        declaring = _Declaring("temporary_view", _dataset("temporary_view", name, function))
        conf = declaring.strings("spark_conf", spark_conf)
        registry = get_active_graph_element_registry()
        registry.register_output(TemporaryView(
            name=declaring.dataset, comment=declaring.text("comment", comment),
            source_code_location=location))
        registry.register_flow(_flow(declaring.dataset, conf, location, function))

    return _decorator(query_function, declare)


def published_view(name: str, *, comment: str | None, table_properties: Mapping[str, str],
                   definition: str, reads: tuple[str, ...], spark_conf: Mapping[str, str]
                   ) -> Callable[[QueryFunction], None]:
    """A view the pipeline publishes (SQL's CREATE VIEW; Python has no such declaration)."""
    location = source_locations.caller(stacklevel=1)

    def declare(function: QueryFunction) -> None:
        properties = _Declaring("CREATE VIEW", name).strings("TBLPROPERTIES", table_properties)
        registry = get_active_graph_element_registry()
        registry.register_output(PublishedView(
            name=name, comment=comment, source_code_location=location,
            table_properties=properties, definition=definition, reads=reads))
        registry.register_flow(_flow(name, spark_conf, location, function))

    return declare


def create_streaming_table(name: str, *, comment: str | None = None,
                           spark_conf: dict[str, str] | None = None,
                           table_properties: dict[str, str] | None = None,
                           path: str | None = None, partition_cols: list[str] | None = None,
                           cluster_by_auto: bool = False, cluster_by: list[str] | None = None,
                           schema: StructType | str | None = None,
                           expect_all: dict[str, str] | None = None,
                           expect_all_or_drop: dict[str, str] | None = None,
                           expect_all_or_fail: dict[str, str] | None = None,
                           row_filter: str | None = None, private: bool = False,
                           format: str | None = None) -> None:
    """A streaming table for flows declared elsewhere (append flows, AUTO CDC); its
    expectations apply to every flow into it. `private`: read by the pipeline, not published
    (Databricks' `create_streaming_table`, `CREATE PRIVATE STREAMING TABLE`)."""
    if not isinstance(name, str):
        raise DeclarationError(f"create_streaming_table: name must be a str, got "
                               f"{type(name).__name__}")
    declaring = _Declaring("create_streaming_table", name)
    expectations = [
        Expectation(rule, constraint, action)
        for argument, given, action in (("expect_all", expect_all, WARN),
                                        ("expect_all_or_drop", expect_all_or_drop, DROP),
                                        ("expect_all_or_fail", expect_all_or_fail, FAIL))
        for rule, constraint in _rules(declaring, argument, given).items()]
    get_active_graph_element_registry().register_output(DeclaredStreamingTable(
        **_table_arguments(declaring, comment=comment, table_properties=table_properties,
                           path=path, partition_cols=partition_cols,
                           cluster_by_auto=cluster_by_auto, cluster_by=cluster_by, schema=schema,
                           row_filter=row_filter, private=private, format=format),
        source_code_location=source_locations.caller(stacklevel=1),
        expectations=tuple(expectations),
        spark_conf=declaring.strings("spark_conf", spark_conf)))


def _rules(declaring: _Declaring, argument: str, given: object) -> dict[str, str]:
    """An expect_all* argument: name -> SQL constraint (parsed with the flows' own, when the
    graph completes: expectations.declaration_problems)."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise declaring.error(f"{argument} takes a dict of name -> SQL constraint")
    return dict(given)


def batch_table_with_flows(name: str, others: list[str]) -> GraphError:
    """The error of a `@dp.table` whose batch query makes it a materialized view while other
    flows write it too (found once its query is built: update.py, dry_run.py)."""
    return GraphError(f"`{name}`'s query is a batch read, which makes it a materialized view "
                      f"(Databricks' @dp.table); {', '.join(f'`{n}`' for n in others)} also "
                      "write(s) it, and a materialized view has no flow but its own query",
                      dataset=name)


DECLARATIONS: dict[str, Callable[..., object]] = {
    "table": table, "materialized_view": materialized_view, "temporary_view": temporary_view,
    "create_streaming_table": create_streaming_table,
    # `@dp.view`, the older dlt module's spelling, as Databricks' own pages still write it
    # (https://docs.databricks.com/aws/en/ldp/database-replication): a temporary view.
    "view": temporary_view}
