"""The Spark JVMs' Hadoop configuration without YARN's defaults: an empty `yarn-default.xml`
(`engine/jvm/hadoop-defaults/`, packed by `make setup` into `HADOOP_DEFAULTS_JAR`) ahead of Hadoop's
own on the JVMs' launch class path.

The first Spark write of a JVM loads MapReduce's `JobConf`, whose static initializer adds
`mapred-default.xml` and `yarn-default.xml` to the default resources of every Hadoop
`Configuration` of the JVM, live ones included. YARN's file alone is 527 of the 1,185
properties a session's configuration then holds, and that configuration is copied whenever
Spark or Delta makes one (`SessionState.newHadoopConf`, Delta's log reads), serialized with
each write task and broadcast with each file scan (`SerializableConfiguration`, a gzip stream
per property for the file that set it). An update of the pipeline makes many small queries, so
this is paid per task, not per row: without YARN's properties a warm ~100-record update takes
about 0.9 of its time and JVM CPU (BENCHMARKS.md, issue 25).

Nothing here runs on YARN: `local[N]` or a standalone cluster, whose executors get the jar on
their launch class path too. MapReduce's own defaults stay, as its committers read them. Like
the class archive, the jar only makes things faster: a session without it (not yet built) has
the same tables, with YARN's defaults in its configuration.
"""

from __future__ import annotations

from pathlib import Path

from exactly_once.local.engine import jvm_parts


def class_path(jar: Path | None = None) -> list[str]:
    """The launch class path entries that leave YARN's defaults out: the clone's jar, else one
    made on first use (jvm_parts.py)."""
    found = jar or jvm_parts.hadoop_defaults_jar()
    return [str(found)] if found is not None and found.is_file() else []
