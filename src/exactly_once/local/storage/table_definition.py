"""A table's declared definition, and Delta's copy of it.

What `dp.table`, `dp.materialized_view` and `dp.create_streaming_table` declare of the table
itself (graph/dataset_declarations.py) reaches Delta, where `DESCRIBE DETAIL`, `SHOW
TBLPROPERTIES` and the columns' metadata show it: the comment, the table properties, the
partition or clustering columns, and a declared schema (column comments, NOT NULL, generated
and identity columns), which is then the table's schema whatever its query selects.

`create` makes a table with its definition (one commit, no Spark job); `conform` brings an
existing table's comment, properties and clustering to what its declaration says now (a commit
only when they differ: a pipeline file edited between updates); `layout_problem` says what only
a full refresh of a streaming table can change (partitioning, a declared schema); `overwrite`
how a materialized view's recompute keeps the definition; `fit_problem` says how a query does
not fit the table, before anything is written. Spark is imported only where it is needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from exactly_once.local.engine.sql_columns import identifier
from exactly_once.local.storage import delta_log, table_templates
from exactly_once.local.storage.files import StoragePath

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

# Where Delta keeps a generated column's expression in the schema (what DeltaTableBuilder's
# `generatedAlwaysAs` writes).
GENERATED = "delta.generationExpression"
COMMENT = "comment"  # a column's comment, as Spark keeps it in the field's metadata
# Where Delta keeps an identity column's definition (what its `IdentityGenerator` writes; the
# log also keeps the column's `delta.identity.highWaterMark`, the last value given).
IDENTITY_START = "delta.identity.start"
IDENTITY_STEP = "delta.identity.step"
IDENTITY_EXPLICIT = "delta.identity.allowExplicitInsert"  # False: GENERATED ALWAYS


def identity_metadata(start: int, step: int, always: bool) -> dict[str, Any]:
    """A column's metadata making it GENERATED ALWAYS (or BY DEFAULT) AS IDENTITY."""
    return {IDENTITY_START: start, IDENTITY_STEP: step, IDENTITY_EXPLICIT: not always}


@dataclass(frozen=True)
class TableDefinition:
    comment: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    partition_cols: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    schema: StructType | None = None  # declared; None: the query's
    location: str | None = None  # `path`: stored there instead of in the warehouse
    private: bool = False  # not published in the catalog

    def table_schema(self, query: StructType) -> StructType:
        return self.schema if self.schema is not None else query

    def fit_problem(self, query: StructType) -> str | None:
        """How a query of schema `query` does not fit the table, in words; None when it fits.
        A declared schema takes the query's columns by name, each of the same type, and every
        column it declares but the generated ones (Delta computes those); the partition and
        clustering columns must be among the table's."""
        if self.schema is not None:
            problem = _schema_problem(self.schema, query)
            if problem:
                return f"its query does not fit its declared schema: {problem}"
        names = {f.name.lower() for f in self.table_schema(query).fields}
        for argument, columns in (("partition_cols", self.partition_cols),
                                  ("cluster_by", self.cluster_by)):
            for column in columns:
                if column.lower() not in names:
                    return f"{argument} names `{column}`, which its query does not produce"
        return None

    def layout_problem(self, path: StoragePath | str) -> str | None:
        """What the stored table at `path` has otherwise than declared and only a full refresh
        changes: its partitioning, or the columns of a declared schema."""
        stored = delta_log.described(path)
        if stored is None:
            return None
        if stored.partition_columns != list(self.partition_cols):
            return (f"it is stored partitioned by {stored.partition_columns} but declares "
                    f"partition_cols {list(self.partition_cols)}")
        if self.schema is not None:
            from pyspark.sql.types import StructType

            columns = StructType.fromJson(json.loads(stored.schema_json))
            if _declared_columns(columns) != _declared_columns(self.schema):
                return (f"its declared schema ({self.schema.simpleString()}) is not the one it "
                        f"is stored with ({columns.simpleString()})")
        return None


@dataclass(frozen=True)
class Overwrite:
    """How a recompute replaces a table's rows and keeps its definition (`overwrite`)."""

    options: dict[str, str]  # of the Delta overwrite
    partition_by: tuple[str, ...] | None  # given to the overwrite when it rewrites the schema


def overwrite(path: StoragePath | str, definition: TableDefinition,
              query: StructType) -> Overwrite:
    """How a materialized view's recompute replaces the rows of the table at `path` (stored
    with its definition: a layout its file changed makes the table anew first, as Delta does
    not repartition a table in place) in one commit and keeps what is declared of it. A plain
    overwrite keeps the comment, properties, partitioning and schema; Delta's overwrite drops a
    table's clustering unless it replaces rows by a condition (`replaceWhere`, every row); a
    query whose columns changed rewrites the schema (`overwriteSchema`, its partitioning given
    again)."""
    from pyspark.sql.types import StructType

    stored = delta_log.described(path)
    if stored is None:
        return Overwrite({}, None)
    columns = StructType.fromJson(json.loads(stored.schema_json))
    if definition.schema is None and [(f.name, _shape(f.dataType)) for f in columns.fields] != [
            (f.name, _shape(f.dataType)) for f in query.fields]:
        return Overwrite({"overwriteSchema": "true"}, definition.partition_cols)
    if stored.clustering_columns:
        return Overwrite({"replaceWhere": "true"}, None)
    return Overwrite({}, None)


def _shape(data_type: DataType) -> Any:
    """A type without nullability: what a query and a table must agree on."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: strip(value) for key, value in node.items()
                    if key not in ("nullable", "containsNull", "valueContainsNull", "metadata")}
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    return strip(data_type.jsonValue())


def _declared_columns(schema: StructType) -> list[tuple[str, Any, bool, Any, Any, Any]]:
    return [(f.name, _shape(f.dataType), f.nullable, f.metadata.get(COMMENT),
             f.metadata.get(GENERATED),
             tuple(f.metadata.get(k) for k in (IDENTITY_START, IDENTITY_STEP, IDENTITY_EXPLICIT)))
            for f in schema.fields]


def _schema_problem(declared: StructType, query: StructType) -> str | None:
    by_name = {f.name.lower(): f for f in declared.fields}
    produced = {f.name.lower() for f in query.fields}
    for column in query.fields:
        found = by_name.get(column.name.lower())
        if found is None:
            return f"column `{column.name}` is not in the schema"
        if _shape(column.dataType) != _shape(found.dataType):
            return (f"column `{column.name}` is {column.dataType.simpleString()} in the query, "
                    f"{found.dataType.simpleString()} in the schema")
    for column in declared.fields:
        if column.name.lower() not in produced and GENERATED not in column.metadata \
                and IDENTITY_START not in column.metadata:
            return f"column `{column.name}` of the schema is not in the query"
        if column.name.lower() in produced and column.metadata.get(IDENTITY_EXPLICIT) is False:
            return (f"column `{column.name}` is GENERATED ALWAYS AS IDENTITY: Delta gives its "
                    "values, the query may not")
    return None


def create(spark: SparkSession, path: str, definition: TableDefinition, schema: StructType,
           properties: Mapping[str, str] | None = None) -> None:
    """An empty Delta table at `path` (unless one is there) with `definition`; `schema` is the
    query's, the table's unless the definition declares one; `properties` add to the declared
    ones. One commit, no Spark job, where writing an empty DataFrame runs a write job for no
    rows.

    One `CREATE TABLE IF NOT EXISTS` statement: Delta's `DeltaTableBuilder` makes the same
    commit, then loads the new table for the `DeltaTable` it returns; the statement costs the
    JVM about 0.7 of that (a new warehouse creates about 20 tables). Columns a DDL string does
    not give back as they are (identity and generated columns, other metadata than a comment,
    arrays or maps whose elements are never NULL) go through the builder, which takes the
    fields as they are. A definition this process already created through Delta, under the same
    Delta settings, gets the commit Delta wrote then, with an id and a time of its own
    (table_templates.py): no statement in the JVM, which is asked only for its settings."""
    columns = definition.table_schema(schema)
    all_properties = {**definition.properties, **(properties or {})}
    template = table_templates.key(spark, path, columns, definition.comment, all_properties,
                                   definition.partition_cols, definition.cluster_by)
    if template is None:  # off a local disk: Delta every time
        _create_through_delta(spark, path, definition, columns, all_properties)
        return
    if table_templates.replay(template, path):
        return
    new = not delta_log.is_delta_table(path)
    _create_through_delta(spark, path, definition, columns, all_properties)
    if new:
        table_templates.remember(template, path)


def _create_through_delta(spark: SparkSession, path: str, definition: TableDefinition,
                          columns: StructType, all_properties: Mapping[str, str]) -> None:
    jvm: Any = spark.sparkContext._jvm
    types = jvm.org.apache.spark.sql.types
    declared = types.DataType.fromJson(columns.json())
    ddl = declared.toDDL()
    if not types.StructType.fromDDL(ddl).equals(declared):
        _create_with_builder(spark, path, definition, columns, all_properties)
        return
    clauses = [f"CREATE TABLE IF NOT EXISTS delta.{identifier(path)} ({ddl}) USING DELTA"]
    if definition.partition_cols:
        clauses.append(f"PARTITIONED BY ({', '.join(map(identifier, definition.partition_cols))})")
    if definition.cluster_by:
        clauses.append(f"CLUSTER BY ({', '.join(map(identifier, definition.cluster_by))})")
    if definition.comment:
        clauses.append(f"COMMENT {sql_literal(definition.comment)}")
    if all_properties:
        clauses.append(f"TBLPROPERTIES {sql_properties(all_properties)}")
    spark.sql(" ".join(clauses))


def _create_with_builder(spark: SparkSession, path: str, definition: TableDefinition,
                         columns: StructType, properties: Mapping[str, str]) -> None:
    from delta.tables import DeltaTable, IdentityGenerator
    from pyspark.sql.types import StructType

    builder = DeltaTable.createIfNotExists(spark).location(path)
    for column in columns.fields:
        if IDENTITY_START not in column.metadata:
            builder = builder.addColumns(StructType([column]))
            continue
        identity = IdentityGenerator(column.metadata[IDENTITY_START],
                                     column.metadata[IDENTITY_STEP])
        how = "generatedByDefaultAs" if column.metadata[IDENTITY_EXPLICIT] \
            else "generatedAlwaysAs"
        builder = builder.addColumn(column.name, column.dataType, nullable=column.nullable,
                                    comment=column.metadata.get(COMMENT), **{how: identity})
    if definition.partition_cols:
        builder = builder.partitionedBy(*definition.partition_cols)
    if definition.cluster_by:
        builder = builder.clusterBy(*definition.cluster_by)
    for key, value in properties.items():
        builder = builder.property(key, value)
    if definition.comment:
        builder = builder.comment(definition.comment)
    builder.execute()


def conform(spark: SparkSession, path: str, definition: TableDefinition) -> None:
    """Bring the table at `path` to the comment, properties and clustering its declaration
    gives now: one ALTER TABLE each for what differs (read from its log), nothing otherwise.
    A property or comment the declaration no longer names stays, as Databricks keeps it."""
    stored = delta_log.described(path)
    if stored is None:
        return
    changed = {key: value for key, value in definition.properties.items()
               if stored.properties.get(key) != value}
    if definition.comment is not None and stored.description != definition.comment:
        changed[COMMENT] = definition.comment  # Delta's table comment, as SET TBLPROPERTIES sets it
    table = f"delta.{identifier(path)}"
    if changed:
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES {sql_properties(changed)}")
    # A partitioned table is not clustered: its layout is `layout_problem`'s (a materialized
    # view's recompute rewrites it).
    if stored.clustering_columns is not None and not stored.partition_columns \
            and stored.clustering_columns != list(definition.cluster_by):
        columns = ", ".join(map(identifier, definition.cluster_by))
        spark.sql(f"ALTER TABLE {table} CLUSTER BY {f'({columns})' if columns else 'NONE'}")


def sql_properties(properties: Mapping[str, str]) -> str:
    """`properties` as a TBLPROPERTIES list: `('key' = 'value', ...)`."""
    return "(" + ", ".join(f"{sql_literal(k)} = {sql_literal(v)}"
                           for k, v in properties.items()) + ")"


def sql_literal(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"
