"""Local files without child processes: the session's `file:` paths go through the project's
Hadoop file system classes (`engine/jvm/local-fs/`, built by `make setup` into `LOCAL_FS_JAR`).

Hadoop's local file system starts a process whenever its native library is not loaded, and the
pyspark wheel ships none: `chmod` for the permission of every file it creates, and `readlink`
twice in every `FileContext` rename, which is how Structured Streaming writes its checkpoint
files and Delta its commits (`HDFSLogStore`). A small update started about 700 of them, each a
fork and an exec of milliseconds (BENCHMARKS.md, issue 25). The classes here make those two
calls through Java NIO and leave everything else to Hadoop: a rename still refuses to overwrite
an existing file, so a Delta commit or a checkpoint file is still written once.

The jar must be on the driver's launch class path (`spark.driver.extraClassPath`, `class_path`):
Hadoop looks file systems up by class name in the JVM's own class loader, before `spark.jars`
exist. On a cluster the settings reach the executors' Hadoop too, so the jar goes on their
launch class path as well (`spark.executor.extraClassPath`): the same path on every worker, as
their Python is (deployment.py), which the project's own cluster (cluster.py, on this machine)
has.

Spark's own recursive deletes (`JavaUtils.deleteRecursively`: a RocksDB state store's local
directory each time a query run loads or closes it, a cloned session's artifacts) run `rm -rf`
on Unix, 16-21 processes an update; `delete_in_the_jvm` sends them down Spark's Java IO path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exactly_once.local.engine import jvm_parts


def class_path(jar: Path | None = None) -> list[str]:
    """The launch class path entry of the classes (the driver's, and a cluster's executors'):
    the clone's jar, else one made on first use (jvm_parts.py); none where it cannot be made
    (no javac): Hadoop's own classes then serve, with their processes."""
    found = jar or jvm_parts.local_fs_jar()
    return [str(found)] if found is not None and found.is_file() else []


def spark_conf() -> dict[str, str]:
    """The session settings that route `file:` paths (FileSystem and FileContext) through the
    classes, once `class_path` is on the JVMs' launch class path; none without them."""
    if not class_path():
        return {}
    return {
        "spark.hadoop.fs.file.impl": "exactlyonce.localfs.NioLocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "exactlyonce.localfs.NioLocalFs",
    }


def delete_in_the_jvm(spark: Any) -> None:
    """Spark's `JavaUtils.deleteRecursively` through Java IO (the walk it falls back to when
    `rm -rf` fails, and takes on macOS under test), not an `rm -rf` process: its public flag
    `JavaUtils.isUnix`, read by that method alone, is set false. `Utils` and `SparkSystemUtils`
    copy the flag when they initialize, for their own uses of it, so they are initialized first
    and keep `true`. The driver JVM only: in `local[N]` the executors' deletes run there too; a
    cluster's executors keep `rm -rf` (their RocksDB stores' directories)."""
    classes = spark.sparkContext._jvm.java.lang.Class
    for copies in ("org.apache.spark.util.Utils$", "org.apache.spark.util.SparkSystemUtils$"):
        classes.forName(copies)  # initialized, so the flag they copied stays true
    classes.forName("org.apache.spark.network.util.JavaUtils").getField("isUnix") \
        .setBoolean(None, False)
