"""A table whose definition this process already created through Delta gets the commit Delta
wrote then, with an id and a time of its own (storage/table_templates.py)."""

from __future__ import annotations

import json

import pytest
from spark_probes import calls_into_the_jvm

from exactly_once.local.storage import delta_log, table_templates
from exactly_once.local.storage.table_definition import TableDefinition, create
from exactly_once.local.storage.table_templates import CHECKSUM, COMMIT

DEFINITION = TableDefinition(comment="Orders, newest state.",
                             properties={"delta.enableChangeDataFeed": "true"},
                             cluster_by=("order_id",))
SCHEMA = "order_id STRING, status STRING, amount BIGINT, updated_at TIMESTAMP"
OWN = ("id", "createdTime", "timestamp", "txnId")  # what each table has of its own


@pytest.fixture
def schema(spark):
    from pyspark.sql.types import _parse_datatype_string

    table_templates.forget()
    yield _parse_datatype_string(SCHEMA)
    table_templates.forget()


def first_commit(path) -> tuple[list[dict], dict]:
    """The table's version 0, its actions and its checksum."""
    log = path / "_delta_log"
    return ([json.loads(line) for line in (log / COMMIT).read_text().splitlines()],
            json.loads((log / CHECKSUM).read_text()))


def without_own(node):
    """`node` with the values every table has of its own taken out."""
    if isinstance(node, dict):
        return {k: without_own(v) for k, v in node.items() if k not in OWN}
    if isinstance(node, (list, tuple)):
        return [without_own(item) for item in node]
    return node


def log_names(path) -> list[str]:
    """The log's entries but hidden ones (Hadoop's checksums of its files, temporary files)."""
    return sorted(p.name for p in (path / "_delta_log").iterdir() if not p.name.startswith("."))


def table_id(path) -> str:
    actions, _ = first_commit(path)
    return next(a["metaData"]["id"] for a in actions if "metaData" in a)


def test_a_definition_created_again_is_delta_s_commit_with_an_id_and_a_time_of_its_own(
        spark, schema, tmp_path):
    create(spark, str(tmp_path / "first"), DEFINITION, schema)
    with calls_into_the_jvm(spark) as calls:
        create(spark, str(tmp_path / "again"), DEFINITION, schema)
    # The session's settings (one map, as text): no statement, no analysis, no commit in the JVM.
    assert len(calls) <= 2, calls
    table_templates.forget()
    create(spark, str(tmp_path / "by_delta"), DEFINITION, schema)  # what Delta writes now
    again, by_delta = first_commit(tmp_path / "again"), first_commit(tmp_path / "by_delta")
    assert without_own(again) == without_own(by_delta)
    assert len({table_id(tmp_path / name) for name in ("first", "again", "by_delta")}) == 3
    assert log_names(tmp_path / "again") == log_names(tmp_path / "by_delta") == sorted([
        COMMIT, CHECKSUM, "_staged_commits"])
    created = next(a["metaData"]["createdTime"] for a in again[0] if "metaData" in a)
    first = next(a["metaData"]["createdTime"] for a in first_commit(tmp_path / "first")[0]
                 if "metaData" in a)
    assert created >= first
    assert again[1]["metadata"]["id"] == table_id(tmp_path / "again")


def test_a_table_made_so_is_one_delta_reads_writes_and_describes(spark, schema, tmp_path):
    create(spark, str(tmp_path / "first"), DEFINITION, schema)
    path = str(tmp_path / "again")
    create(spark, path, DEFINITION, schema)
    spark.createDataFrame([("o1", "paid", 5, None)], schema).write.format("delta") \
        .mode("append").save(path)
    assert [tuple(r) for r in spark.read.format("delta").load(path).collect()] == \
        [("o1", "paid", 5, None)]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert (detail.id, detail.description, detail.clusteringColumns, detail.properties) == (
        table_id(tmp_path / "again"), DEFINITION.comment, ["order_id"],
        {"delta.checkpointInterval": "50", "delta.enableChangeDataFeed": "true"})
    changes = spark.read.format("delta").option("readChangeFeed", "true") \
        .option("startingVersion", 0).load(path)
    assert changes.select("order_id", "_change_type").collect() == [("o1", "insert")]


def test_a_table_already_there_is_left_as_it_is(spark, schema, tmp_path):
    create(spark, str(tmp_path / "first"), DEFINITION, schema)
    path = tmp_path / "there"
    spark.createDataFrame([("o1", "paid", 5, None)], schema).write.format("delta").save(str(path))
    create(spark, str(path), DEFINITION, schema)
    assert delta_log.latest_version(path) == 0
    assert spark.read.format("delta").load(str(path)).count() == 1


def test_other_delta_settings_make_a_commit_of_their_own(spark, schema, tmp_path):
    create(spark, str(tmp_path / "first"), DEFINITION, schema)
    key = "spark.databricks.delta.properties.defaults.appendOnly"
    spark.conf.set(key, "true")
    try:
        create(spark, str(tmp_path / "append_only"), DEFINITION, schema)
    finally:
        spark.conf.unset(key)
    metadata = next(a["metaData"] for a in first_commit(tmp_path / "append_only")[0]
                    if "metaData" in a)
    assert metadata["configuration"].get("delta.appendOnly") == "true", metadata
