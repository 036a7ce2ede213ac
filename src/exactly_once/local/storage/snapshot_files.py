"""A Delta table's latest version read as the Parquet files its log names.

Delta's reader, given a table at a version it has not read yet, rebuilds the table's state from
its log before it plans a scan: a Spark job over the log files, then two more that aggregate the
state (`Snapshot.computedState`: the file count and size the scan and a MERGE ask for). Every
commit makes a new version, so each update paid those jobs again for every table it read in
batch: its AUTO CDC flows' own state tables and targets, and a materialized view's upstream.
The same rows are in the files the log's latest version names (`delta_log.plain_parquet_files`,
read from the commit files in Python), read as plain Parquet with the table's schema: a file's
rows change only when a commit removes the file, which the log says.
"""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from exactly_once.local.storage import delta_log

# Up to this many paths, a read's files are listed in the driver (Spark's default: 32).
PATHS_LISTED_IN_DRIVER = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def paths_listed_in_driver(spark: SparkSession) -> int:
    return int(spark.conf.get(PATHS_LISTED_IN_DRIVER, "32") or 32)


def compact_when_many_files(spark: SparkSession, path: str) -> bool:
    """Rewrite the table's files into one (Delta's OPTIMIZE: a commit without data change) once
    they are more than half of what `read_latest` reads as files; whether it did.

    A table appended to every micro-batch, as an AUTO CDC state table is, gains a file each
    time; past the limit every read of it would go through Delta's reader, its state rebuilt
    at each new version (three Spark jobs), and every batch after the 32nd update paid that.
    """
    files = delta_log.plain_parquet_files(path)
    if files is None or len(files) <= paths_listed_in_driver(spark) // 2:
        return False
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    return True


def read_latest(spark: SparkSession, path: str) -> DataFrame:
    """The Delta table at `path`, as of its latest version, as the Parquet files its log names.

    A table without files is an empty local relation of the table's schema. A table the log
    cannot describe so (partitions, deletion vectors, column mapping, commit files cleaned up)
    is read by Delta, and so is one of more files than Spark lists in the driver: beyond that
    it lists the paths of a read with a Spark job of a task per path.
    """
    table = spark.read.format("delta").load(path)
    files = delta_log.plain_parquet_files(path)
    if files is None or len(files) > paths_listed_in_driver(spark):
        return table
    if not files:  # built in the JVM: a local relation, no Python RDD
        no_rows = spark._jvm.java.util.ArrayList()  # type: ignore[union-attr]
        return DataFrame(spark._jsparkSession.createDataFrame(no_rows, table._jdf.schema()),
                         spark)
    return spark.read.schema(table.schema).parquet(*files)
