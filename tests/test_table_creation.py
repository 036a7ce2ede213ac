"""`table_definition.create` writes the same first commit as Delta's own `DeltaTableBuilder`:
one CREATE TABLE statement for columns a DDL string carries, the builder for the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from exactly_once.local.storage import table_definition
from exactly_once.local.storage.table_definition import (
    GENERATED,
    TableDefinition,
    identity_metadata,
)

NESTED = StructType([
    StructField("id", LongType(), False, {"comment": "the key's 'id'"}),
    StructField("odd`name", StringType()),
    StructField("amount", DecimalType(18, 2)),
    StructField("at", TimestampType(), True, {"comment": "when"}),
    StructField("local_at", TimestampNTZType()),
    StructField("tags", ArrayType(StringType())),
    StructField("attrs", MapType(StringType(), LongType())),
    StructField("item", StructType([StructField("sku", StringType(), False,
                                                {"comment": "inner"}),
                                    StructField("qty", LongType())])),
    StructField("day", StringType()),
])

# name: (definition, query schema, properties added, made by the builder)
DEFINITIONS = {
    "plain": (TableDefinition(), NESTED, None, False),
    "everything declared": (TableDefinition(
        comment="Orders, 'quoted'", partition_cols=("day",),
        properties={"delta.enableChangeDataFeed": "true", "pipelines.note": "a 'b' c"}),
        NESTED, {"delta.enableRowTracking": "true"}, False),
    "clustered": (TableDefinition(cluster_by=("id", "day")), NESTED, None, False),
    # A DDL string cannot say that an array's or a map's elements are never NULL.
    "elements never NULL": (TableDefinition(), StructType([
        StructField("tags", ArrayType(StringType(), False)),
        StructField("attrs", MapType(StringType(), LongType(), False))]), None, True),
    "identity and generated columns": (TableDefinition(schema=StructType([
        StructField("n", LongType(), False, identity_metadata(1, 1, always=True)),
        StructField("id", LongType()),
        StructField("twice", LongType(), True, {GENERATED: "id * 2"}),
    ])), StructType([StructField("id", LongType())]), None, True),
}
# Names Delta draws at random for each table with row tracking.
RANDOM_NAMES = re.compile(r"(_row-(?:id|commit-version)-col-)[0-9a-f-]{36}")


def first_commit(path: Path) -> dict:
    """The table's first commit, without what differs between any two creations."""
    actions = [json.loads(line) for line in
               (path / "_delta_log" / f"{0:020}.json").read_text().splitlines()]
    kept = {}
    for action in actions:
        (kind, value), = action.items()
        if kind == "commitInfo":
            continue
        if kind == "metaData":
            value = {k: v for k, v in value.items() if k not in ("id", "createdTime")}
            value["configuration"] = {k: RANDOM_NAMES.sub(r"\1<uuid>", v)
                                      for k, v in value["configuration"].items()}
            value["schemaString"] = json.loads(value["schemaString"])
        kept.setdefault(kind, []).append(value)
    return kept


@pytest.mark.parametrize("name", DEFINITIONS)
def test_a_table_is_created_as_delta_s_builder_creates_it(spark, tmp_path, monkeypatch, name):
    definition, schema, properties, by_builder = DEFINITIONS[name]
    ours, builders = tmp_path / "ours", tmp_path / "builder"
    builder = table_definition._create_with_builder
    built: list[str] = []

    def recorded(spark, path, *args):
        built.append(path)
        builder(spark, path, *args)

    monkeypatch.setattr(table_definition, "_create_with_builder", recorded)
    table_definition.create(spark, str(ours), definition, schema, properties)
    assert built == ([str(ours)] if by_builder else [])
    builder(
        spark, str(builders), definition, definition.table_schema(schema),
        {**definition.properties, **(properties or {})})
    assert first_commit(ours) == first_commit(builders)
    # IF NOT EXISTS: a table already there is left as it is, whatever is asked.
    table_definition.create(spark, str(ours), definition, schema, properties)
    table_definition.create(spark, str(ours), TableDefinition(comment="another"),
                            StructType([StructField("other", LongType())]))
    assert not (ours / "_delta_log" / f"{1:020}.json").exists()
