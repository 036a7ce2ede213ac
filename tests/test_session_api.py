"""The session the project hands users (`build_session`) is a complete Spark session: after a
pipeline update, the catalog API and the typed-decoding paths reachable from Python work in it,
as they do in a plain SparkSession (issue 29: a setting made for speed broke `listTables`)."""

from __future__ import annotations

from pyspark.sql import Observation
from pyspark.sql import functions as F

GOLD = "orders"


def test_the_catalog_api_lists_and_describes_the_pipeline_tables(spark, quality_run):
    assert "default" in [db.name for db in spark.catalog.listDatabases()]
    tables = {t.name: t for t in spark.catalog.listTables()}
    assert set(quality_run.result.table_rows) <= set(tables)
    assert not tables[GOLD].isTemporary
    assert spark.catalog.tableExists(GOLD)
    assert not spark.catalog.tableExists("no_such_table")
    table = spark.catalog.getTable(GOLD)
    assert (table.name, table.tableType) == (GOLD, "EXTERNAL")
    columns = {c.name: c for c in spark.catalog.listColumns(GOLD)}
    assert {"order_id", "status", "amount"} <= set(columns)
    assert columns["amount"].dataType == "decimal(18,2)"
    assert "max_by" in {f.name for f in spark.catalog.listFunctions()}
    assert spark.catalog.functionExists("max_by")
    assert spark.catalog.getDatabase("default").name == "default"


def test_typed_decoding_paths_work_on_a_pipeline_table(spark, quality_run):
    orders = spark.read.table(GOLD)
    rows = quality_run.result.table_rows[GOLD]
    assert rows > 0
    described = {r["summary"]: r for r in orders.describe("amount").collect()}
    assert int(described["count"]["amount"]) == rows
    summary = {r["summary"]: r for r in orders.select("amount").summary("min", "max").collect()}
    assert set(summary) == {"min", "max"}
    observation = Observation("orders")
    orders.observe(observation, F.count(F.lit(1)).alias("n")).collect()
    assert observation.get == {"n": rows}
    frame = orders.select("order_id", "amount").toPandas()
    assert len(frame) == rows
    assert frame["order_id"].is_unique
