"""The Spark JVM's class-data-sharing archive: classes a pipeline update loads, mapped from one
file instead of being read, verified and parsed from jars at every start.

A JVM spends most of a bare Spark session's start loading classes; with the archive a command's
session starts markedly faster (BENCHMARKS.md, issue 19). `make setup` builds it once by running
a tiny update in a JVM started with `-XX:ArchiveClassesAtExit` (JDK 13+, a dynamic archive over
the JDK's default one), which writes the archive when that JVM exits. Sessions then start with
`-XX:SharedArchiveFile`. The JVM checks the archive against itself and its class path at start
and ignores an archive that does not match (another JDK, other jars): nothing breaks, the start
is only as slow as without it. Its log lines about that are off, so a command's output stays
its own.

    python -m exactly_once.local.class_archive [ARCHIVE]   # what `make setup` runs
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from exactly_once.paths import CLASS_ARCHIVE

# -Xshare:auto is the default: an archive that cannot be used is skipped, not an error.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def java_options(archive: Path = CLASS_ARCHIVE) -> str:
    """The driver JVM's options for using `archive`; empty when it has not been built."""
    return f"-XX:SharedArchiveFile={archive} {_QUIET}" if archive.is_file() else ""


def build(archive: Path = CLASS_ARCHIVE) -> None:
    """Runs a tiny pipeline update in a JVM of its own, which writes `archive` as it exits."""
    from pyspark import SparkContext

    from exactly_once.config import load_settings
    from exactly_once.kafka.generator import GeneratorConfig, generate_stream
    from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
    from exactly_once.local.pipeline import run_pipeline
    from exactly_once.local.session import build_session

    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)  # a JVM must not map the file it is writing
    with tempfile.TemporaryDirectory(prefix="class-archive-") as tmp:
        work = Path(tmp)
        stream = work / "stream.jsonl"
        write_kcat_jsonl(stream, as_consumed(generate_stream(GeneratorConfig(
            events=60, orders=6, players=3, malformed_rate=0.05, seed=1))))
        options = f"-XX:ArchiveClassesAtExit={archive} {_QUIET}"
        spark = build_session(work / "warehouse", log_level="OFF",
                              extra_conf={"spark.driver.extraJavaOptions": options})
        run_pipeline(spark, replace(load_settings("local"), source=f"file:{stream}"),
                     work / "warehouse")
        gateway = SparkContext._gateway
        spark.stop()
        # The JVM writes the archive when it exits, and it exits when its stdin closes
        # (PythonGatewayServer): wait for that here rather than race this process's exit.
        assert gateway is not None
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=600)
    if not archive.is_file():
        raise SystemExit(f"the JVM wrote no class archive at {archive}")
    print(f"class archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else CLASS_ARCHIVE)
