"""The session the project hands users (`build_session`) is a complete Spark session: after a
pipeline update, the catalog API and the typed-decoding paths reachable from Python work in it,
as they do in a plain SparkSession (issue 29: a setting made for speed broke `listTables`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from py4j.protocol import Py4JError
from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from spark_probes import (
    calls_into_the_jvm,
    last_execution_id,
    sql_plans_since,
    vm_option,
)

from exactly_once.errors import GraphError
from exactly_once.local.storage.warehouse import create_empty_table

GOLD = "orders"


@pytest.fixture
def quality_tables(spark, quality_run):
    """The session's catalog naming the quality run's tables, as right after its update (any
    update run since in this session has moved the names to its own warehouse)."""
    from exactly_once.local.storage.warehouse import Warehouse

    warehouse = Warehouse(quality_run.warehouse)
    for name in quality_run.result.table_rows:
        warehouse.register(spark, name)
    return quality_run


def test_the_catalog_api_lists_and_describes_the_pipeline_tables(spark, quality_tables):
    assert "default" in [db.name for db in spark.catalog.listDatabases()]
    tables = {t.name: t for t in spark.catalog.listTables()}
    assert set(quality_tables.result.table_rows) <= set(tables)
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


def test_typed_decoding_paths_work_on_a_pipeline_table(spark, quality_tables):
    orders = spark.read.table(GOLD)
    rows = quality_tables.result.table_rows[GOLD]
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


def test_a_table_name_follows_the_warehouse_updated_last(spark, tmp_path):
    """Warehouses updated one after the other in one session, incrementally (no full refresh
    drops the name first): the catalog name reads the warehouse updated last, also when the
    one it named before has been deleted since (what the CI run of 2026-11-23 hit)."""
    from exactly_once.local.storage.warehouse import Warehouse

    name = "catalog_follows_last_update"
    first, second = Warehouse(tmp_path / "first"), Warehouse(tmp_path / "second")
    for rows, warehouse in ((1, first), (2, second)):
        spark.range(rows).write.format("delta").save(str(warehouse.table_path(name)))
    first.register(spark, name)
    assert spark.read.table(name).count() == 1
    second.register(spark, name)
    assert spark.read.table(name).count() == 2
    first.register(spark, name)
    shutil.rmtree(first.root)
    second.register(spark, name)
    assert spark.read.table(name).count() == 2
    second.register(spark, name)  # already its name: nothing to change
    assert spark.read.table(name).count() == 2
    detail = spark.sql(f"DESCRIBE DETAIL `{name}`").first()
    assert detail is not None
    assert detail["location"].removeprefix("file:") == str(second.table_path(name).resolve())
    assert spark.catalog.getTable(name).tableType == "EXTERNAL"

    # A cached read of the name is not served once the name points elsewhere.
    third = Warehouse(tmp_path / "third")
    spark.range(3).write.format("delta").save(str(third.table_path(name)))
    cached = spark.read.table(name).cache()
    try:
        assert cached.count() == 2
        third.register(spark, name)
        assert spark.read.table(name).count() == 3
    finally:
        cached.unpersist()

    # A user's external table of another format with the name: the pipeline's Delta table
    # takes the name, not its location alone.
    spark.range(5).write.parquet(str(tmp_path / "parquet"))
    spark.sql(f"DROP TABLE `{name}`")
    spark.sql(f"CREATE TABLE `{name}` USING PARQUET LOCATION '{tmp_path / 'parquet'}'")
    second.register(spark, name)
    assert spark.read.table(name).count() == 2
    described = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE EXTENDED `{name}`")
                 .where("col_name IN ('Provider', 'Location')").collect()}
    assert described == {"Provider": "delta",
                         "Location": f"file:{second.table_path(name).resolve()}"}, described

    spark.sql("CREATE TABLE catalog_managed_by_the_user USING DELTA AS SELECT 1 AS id")
    try:
        with pytest.raises(GraphError, match="managed table `catalog_managed_by_the_user`"):
            second.register(spark, "catalog_managed_by_the_user")
        assert spark.read.table("catalog_managed_by_the_user").count() == 1, "left as it was"
    finally:
        spark.sql("DROP TABLE catalog_managed_by_the_user")


def test_the_session_s_jvm_runs_in_utc_whatever_the_machine_s_zone(spark):
    """The JVM's default zone and `user.timezone` are UTC, as the session's: with any of the
    three elsewhere (a laptop in Los Angeles), Delta rebuilt a small table's whole state after
    every commit to verify its checksum's file list, 24 Spark jobs more in a warm update
    (engine/jvm_options.py). A machine set to UTC gives "Etc/UTC" here without the option."""
    jvm = spark._jvm
    assert jvm.java.util.TimeZone.getDefault().getID() == "UTC"
    assert jvm.java.lang.System.getProperty("user.timezone") == "UTC"
    snapshot = getattr(jvm, "org.apache.spark.sql.delta.Snapshot$").__getattr__("MODULE$")
    assert not snapshot.allFilesInCrcVerificationForceEnabled(spark._jsparkSession)


def test_building_a_column_costs_only_its_own_calls_into_the_jvm(spark):
    """PySpark's DataFrame debugging is off: with it every PySpark function first sends its
    Python call site to the JVM (24 py4j calls instead of 4 for these two, and a failed
    IPython import each), most of the py4j traffic of an update. And the gateway remembers the
    class `functions` and its method `col` (engine/py4j_lookups.py): two reflection commands
    fewer for every PySpark function after its first."""
    F.col("w")  # pyspark reads the setting from the session at its first function, once
    with calls_into_the_jvm(spark) as calls:
        F.col("x").alias("y")  # `col`, `as`
    assert len(calls) == 2, calls


def test_the_probe_counts_the_block_s_calls_not_py4j_s_releases_meanwhile(spark):
    """py4j tells the JVM of Python objects released from its own thread, every second or so
    (its FinalizerWorker): those commands are not the block's and came into its count at random
    (CI, 2026-11-29: three releases counted with the two calls of `col(...).alias(...)`)."""
    released = [spark._jvm.java.lang.StringBuilder(str(n)) for n in range(3)]
    del released  # queued for py4j's finalizer thread, which sleeps a second when idle
    with calls_into_the_jvm(spark) as calls:
        time.sleep(2.5)
    assert calls == []


def test_a_name_the_jvm_does_not_have_is_asked_again_and_refused_again(spark):
    functions = getattr(spark._jvm, "org.apache.spark.sql.functions")
    for _ in range(2):
        with calls_into_the_jvm(spark) as calls, pytest.raises(Py4JError, match="does not exist"):
            functions.no_such_function  # noqa: B018 - the lookup is the test
        assert len(calls) == 1


def test_a_class_reached_through_its_packages_is_looked_up_once(spark):
    """`jvm.java.util.TimeZone` asks the JVM about `java`, then `java.util` (each a failed class
    load across the class path), then the class: once. PySpark and Delta reach their classes
    this way about 190 times an update of the pipeline."""
    jvm = spark._jvm
    assert jvm.java.util.TimeZone.getDefault().getID() == "UTC"
    with calls_into_the_jvm(spark) as calls:
        assert jvm.java.util.TimeZone.getDefault().getID() == "UTC"
    assert len(calls) == 2, calls  # the two calls themselves


def test_a_package_nothing_was_found_in_is_asked_again(spark):
    """A name that is no class is a package to py4j: kept only once a class is found in it, so
    a class the JVM gains later (a jar added to the session) is still found."""
    for _ in range(2):
        with calls_into_the_jvm(spark) as calls:
            spark._jvm.no_such.package.Here  # noqa: B018 - the lookup is the test
        assert len(calls) == 3, calls


def test_creating_a_table_plans_no_query_over_its_empty_file_list(spark, tmp_path):
    """Creating a table runs its CREATE TABLE command and nothing else: Delta's `allFilesInCrc`,
    whose file lists in each commit's checksum a scan never reads, is off (engine/session.py);
    on, each new table's commit first planned and ran a query over the empty snapshot's files
    to start the list."""
    before = last_execution_id(spark)
    create_empty_table(spark, str(tmp_path / "t"), StructType([StructField("a", StringType())]))
    plans = sql_plans_since(spark, before)
    assert plans and [p for p in plans if "CreateTable" not in p] == []


# -- the JIT: tiered in a long-lived session, C1 alone where a process runs one small update ------
JIT_MODE = """
import sys; from pathlib import Path
sys.path.insert(0, sys.argv[2])
from exactly_once.local.engine.session import build_session
from spark_probes import vm_option
spark = build_session(Path(sys.argv[1]), log_level="OFF")
print(vm_option(spark, "TieredStopAtLevel"), vm_option(spark, "ReservedCodeCacheSize"))
spark.stop()
"""


def test_the_suite_s_session_started_its_flight_recorder_with_it(spark):
    """The suite records the processes its session's JVM starts (`run --profile`,
    test_local_fs.py) with Java Flight Recorder. JDK 17 starts the recorder by rewriting
    `java.lang.Throwable` and its I/O classes, which throws away every compiled method that
    inlined them: started by a test's first recording, the next update compiled everything
    again (47 s of compilation instead of 6, 28 s instead of 12; CI: 132 s for the profile
    test's two updates). tests/conftest.py starts it with the session."""
    assert spark._jvm.jdk.jfr.FlightRecorder.isInitialized()


def test_the_suite_s_session_compiles_with_c2_and_the_processes_it_starts_with_c1(spark,
                                                                                  tmp_path):
    """tests/conftest.py sets EXACTLY_ONCE_JIT=c1 for the processes the suite starts (unless
    the environment chose) and keeps its own session tiered (engine/jvm_options.py): both as
    their JVMs report it. Either way the JVM reserves tiered's code cache: C1 alone would get
    HotSpot's 48 MB, which a continuous run's updates filled ("Out of space in CodeCache for
    adapters", a failed update)."""
    assert vm_option(spark, "TieredStopAtLevel") == "4"
    done = subprocess.run([sys.executable, "-c", JIT_MODE, str(tmp_path / "wh"),
                           str(Path(__file__).parent)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [{"c1": "1", "tiered": "4"}[os.environ["EXACTLY_ONCE_JIT"]],
                                   vm_option(spark, "ReservedCodeCacheSize")]
