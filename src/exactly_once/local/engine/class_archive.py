"""The Spark JVM's class-data-sharing archive: classes a pipeline update loads, mapped from one
file instead of being read, verified and parsed from jars at every start.

A JVM spends most of a bare Spark session's start loading classes; with the archive a command's
session starts markedly faster (BENCHMARKS.md, issue 19). `make setup` builds it once by running
a tiny update in a JVM started with `-XX:ArchiveClassesAtExit` (JDK 13+, a dynamic archive over
the JDK's default one), which writes the archive when that JVM exits. Sessions then start with
`-XX:SharedArchiveFile`. The JVM checks the archive against itself and its class path at start
and ignores an archive that does not match (another JDK, other jars, a launch class path that
does not begin as the training JVM's): nothing breaks, the start is only as slow as without it.
A cluster's executors map it too, with the driver's launch class path (engine/session.py). Its
log lines about that are off, so a command's output stays its own.

The training update that writes it is `exactly_once.local.execution.train_jvm` (an update
runs above the engine).
"""

from __future__ import annotations

from pathlib import Path

from exactly_once.paths import CLASS_ARCHIVE

# -Xshare:auto is the default: an archive that cannot be used is skipped, not an error.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def java_options(archive: Path = CLASS_ARCHIVE) -> str:
    """The driver JVM's options for using `archive`; empty when it has not been built."""
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else ""
