"""The local SparkSession: classic PySpark with Delta Lake and the Kafka source on the classpath."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from exactly_once.errors import EngineError, MissingJarsError
from exactly_once.local.engine import (
    catalog_plugin,
    hadoop_defaults,
    jvm_options,
    jvm_parts,
    local_fs,
    py4j_lookups,
)
from exactly_once.local.engine.deployment import Deployment


def _artifact(jar: Path) -> str:
    """`kafka-clients-3.9.2.jar` -> `kafka-clients`: the name without its version."""
    parts = jar.stem.split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def spark_jars(jars_dir: Path | None = None, *more: Path) -> list[str]:
    """Delta and Kafka-source jars (default: the clone's `JARS_DIR/spark`, else the user cache's:
    jvm_parts.py), less any
    artifact the pyspark wheel already ships.

    Maven resolves Delta's full runtime closure (Hadoop, Parquet, Jackson, ...); Spark already
    carries its own versions of those, and two copies on one classpath is how NoSuchMethodErrors
    start. So only artifacts missing from the wheel are added.
    """
    jars: list[Path] = []
    for directory in (jars_dir or jvm_parts.spark_jar_dir(), *more):
        found = sorted(directory.glob("*.jar"))
        if not found:
            raise MissingJarsError(f"no jars in {directory}; run `make setup` first")
        jars += found
    bundled = {_artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [str(j) for j in jars if _artifact(j) not in bundled]


@contextmanager
def _stderr_into(log: Path | None) -> Iterator[None]:
    """While the JVM starts, this process's stderr (file descriptor 2) is `log`: the JVM, and
    the Python workers it starts, inherit it and keep writing there; this process gets its own
    stderr back. None leaves stderr alone."""
    if log is None:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with log.open("ab") as out:
            os.dup2(out.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# The session of a resident engine (cli/engine_server.py), which every command it runs gets.
_resident: SparkSession | None = None


def keep_resident(spark: SparkSession) -> None:
    """From now on `build_session` returns `spark` for a `local[N]` deployment, and a command's
    `stop()` leaves it running: the resident engine runs command after command in it."""
    global _resident
    spark.stop = lambda: None  # type: ignore[method-assign]
    _resident = spark


def build_session(warehouse: Path | str, app_name: str = "exactly-once",
                  shuffle_partitions: int = 2, extra_conf: dict[str, str] | None = None,
                  log_level: str = "ERROR", jvm_log: Path | None = None,
                  deployment: Deployment | None = None, jit: str | None = None) -> SparkSession:
    """The session; `jvm_log`: where the JVM's own stderr goes (its start-up notes, anything it
    prints outside `log_level`), for a command whose stderr must hold only its own messages.
    `deployment`: the master and what its executors need (default: `local[2]`). `jit`: the
    driver's JIT (jvm_options.JITS; default: `EXACTLY_ONCE_JIT`, else tiered)."""
    deployment = deployment or Deployment()
    if _resident is not None:
        if deployment.is_cluster or deployment.jar_dirs:
            raise EngineError(f"the resident engine runs local[2]; stop it "
                              f"(`exactly-once engine stop`) to run on {deployment.master}"
                              f"{' with an object store' if deployment.jar_dirs else ''}")
        return _resident
    builder = (
        SparkSession.builder.master(deployment.master)
        .appName(app_name)
        .config("spark.jars", ",".join(spark_jars(None, *deployment.jar_dirs)))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog",
                "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", str(warehouse if isinstance(warehouse, str)
                                               else warehouse.resolve()))
        .config("spark.sql.session.timeZone", "UTC")
        # As many as `local[2]`'s task slots. A stateful operator (silver's dedup) keeps a
        # RocksDB store per partition, loaded and closed by every update of its query: 4 cost
        # a warm update about 4% more (BENCHMARKS.md, "Two shuffle partitions"). A checkpoint
        # keeps the number it was started with, so a warehouse made before keeps its 4.
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        # Bounded, on-disk streaming state, as on Databricks (RocksDB, with changelog
        # checkpointing: each commit writes the changed keys, not a snapshot of the store;
        # Databricks' default since Runtime 17.3, readable by a checkpoint written without it).
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        # Batches without data stay on, Spark's and Databricks' default: the update that moves
        # a watermark emits what it closed (a window, an outer join's unmatched row) and
        # expires the state it passed (tests/databricks_docs/test_docs_stateful_processing.py).
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        # A Delta table's state rebuilt (its log replayed) in one task, not Delta's 50: the
        # local tables' logs are a few files, and each task more costs its scheduling.
        .config("spark.databricks.delta.snapshotPartitions", "1")
        # No file list in each commit's checksum (`.crc`): Delta 4.4 keeps one for a small table
        # only to compute the next checksum's and to verify it, never to plan a scan, and
        # starting it costs every new table a query over its empty snapshot (a new warehouse
        # creates about 20), and so did verifying it outside UTC (engine/jvm_options.py). The
        # checksum keeps its counts, protocol and metadata.
        .config("spark.databricks.delta.allFilesInCrc.enabled", "false")
        # No whole-stage code generation: the local runtime's queries are many and mostly
        # small, and generating and compiling code for each plan (then JIT-compiling it) cost
        # more than it saved (BENCHMARKS.md, issue 19). Expression code generation is off only
        # while an update runs (engine/update_settings.py): the session keeps Spark's default
        # (`factoryMode` FALLBACK), as NO_CODEGEN breaks typed decoding such as
        # `spark.catalog.listTables()` (issue 29).
        .config("spark.sql.codegen.wholeStage", "false")
        # The classes Spark still generates (Delta's statistics of each file it writes,
        # encoders, projections built by a generator directly) kept for the session: an update
        # of this pipeline asks for more than the default 100 entries hold, which Guava splits
        # into four segments evicted on their own, so each update compiled the same 19-45
        # classes again (4-6% of a new warehouse's update's JVM CPU, BENCHMARKS.md).
        .config("spark.sql.codegen.cache.maxEntries", "1000")
        .config("spark.sql.streaming.numRecentProgressUpdates", "10000")
        # No Python call site captured for each PySpark function (`F.col`, `withColumn`, ...):
        # it cost 15 py4j calls and a failed IPython import per function instead of one call,
        # most of an update's 21,000 py4j calls. It only adds the Python line to the query
        # context of a runtime error's message; the runtime's own errors do not use it.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .config("spark.databricks.delta.properties.defaults.checkpointInterval", "50")
    )
    # On the JVMs' launch class path: local files through Java NIO, not `chmod` and `readlink`
    # processes (engine/local_fs.py), Hadoop without YARN's defaults (hadoop_defaults.py) and
    # the local catalog's plugin (catalog_plugin.py, used by the driver only). A cluster's
    # executors get the same path, so that the driver's class archive fits them too
    # (engine/jvm_options.py).
    class_path = os.pathsep.join([*local_fs.class_path(), *hadoop_defaults.class_path(),
                                  *catalog_plugin.class_path()])
    builder = builder.config("spark.driver.extraClassPath", class_path)
    if deployment.is_cluster:  # in `local[N]` the executors are the driver's JVM
        builder = builder.config("spark.executor.extraClassPath", class_path)
    for key, value in local_fs.spark_conf().items():
        builder = builder.config(key, value)
    # The JIT, the collector, the zone and `make setup`'s class archive (engine/jvm_options.py):
    # a cluster's executors, which live as long as the application, get the driver's.
    java_options = jvm_options.java_options(jit=jit)
    builder = builder.config("spark.driver.extraJavaOptions", java_options)
    if deployment.is_cluster:
        builder = builder.config("spark.executor.extraJavaOptions", java_options)
    for key, value in (dict(deployment.conf) | (extra_conf or {})).items():
        builder = builder.config(key, value)
    with _stderr_into(jvm_log):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    # The Python workers of UDFs: pyspark takes PYSPARK_PYTHON, else the first `python3` on
    # PATH, for every UDF it sends (engine/deployment.py).
    spark.sparkContext.pythonExec = deployment.python
    local_fs.delete_in_the_jvm(spark)  # in `local[N]` the executors' deletes too
    # PySpark's functions with one round trip to the JVM each, not three (py4j_lookups.py).
    py4j_lookups.remember(spark.sparkContext._jvm)
    return spark
