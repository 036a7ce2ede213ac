"""`make setup`'s training update: a tiny pipeline update in a JVM of its own, which writes the
engine's class-data-sharing archive (`engine/class_archive.py`) as it exits. The resident
engine (cli/engine_server.py) warms its session with the same updates.

    python -m exactly_once.local.execution.train_jvm [ARCHIVE]   # what `make setup` runs
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from pyspark.sql import SparkSession

from exactly_once.local.engine import class_archive, jvm_options
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.paths import CLASS_ARCHIVE

DAY = timedelta(days=1)


def training_updates(spark: SparkSession, work: Path, updates: int = 1) -> None:
    """Tiny pipeline updates into a warehouse under `work`: every kind of flow, a few malformed
    records, and from the second update on, gold tables that already hold rows."""
    from exactly_once.kafka.generator import GeneratorConfig, generate_stream
    from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
    from exactly_once.settings.pipeline import load_settings

    dumps = work / "dumps"
    dumps.mkdir(parents=True, exist_ok=True)
    for update in range(updates):
        write_kcat_jsonl(dumps / f"stream-{update}.jsonl", as_consumed(generate_stream(
            GeneratorConfig(events=60, orders=6, players=3, malformed_rate=0.05,
                            seed=1 + update, start=GeneratorConfig.start + update * DAY))))
        run_pipeline(spark, replace(load_settings("local"), source=f"file:{dumps}"),
                     work / "warehouse")


def build(archive: Path = CLASS_ARCHIVE) -> None:
    """Runs a tiny pipeline update in a JVM of its own, which writes `archive` as it exits."""
    from pyspark import SparkContext

    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)  # a JVM must not map the file it is writing
    with tempfile.TemporaryDirectory(prefix="class-archive-") as tmp:
        work = Path(tmp)
        # The session's own options (no archive yet: it was removed above), so the classes
        # archived are those a session loads with the same JIT and collector.
        options = jvm_options.java_options(f"-XX:ArchiveClassesAtExit={archive}",
                                           class_archive.QUIET)
        spark = build_session(work / "warehouse", log_level="OFF",
                              extra_conf={"spark.driver.extraJavaOptions": options})
        training_updates(spark, work)
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
