"""`make setup`'s training update: a tiny pipeline update in a JVM of its own, which writes the
engine's class-data-sharing archive (`engine/class_archive.py`) as it exits.

    python -m exactly_once.local.execution.train_jvm [ARCHIVE]   # what `make setup` runs
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from exactly_once.local.engine import class_archive, driver_jvm
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.paths import CLASS_ARCHIVE


def build(archive: Path = CLASS_ARCHIVE) -> None:
    """Runs a tiny pipeline update in a JVM of its own, which writes `archive` as it exits."""
    from pyspark import SparkContext

    from exactly_once.config import load_settings
    from exactly_once.kafka.generator import GeneratorConfig, generate_stream
    from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl

    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)  # a JVM must not map the file it is writing
    with tempfile.TemporaryDirectory(prefix="class-archive-") as tmp:
        work = Path(tmp)
        stream = work / "stream.jsonl"
        write_kcat_jsonl(stream, as_consumed(generate_stream(GeneratorConfig(
            events=60, orders=6, players=3, malformed_rate=0.05, seed=1))))
        # The session's own options (no archive yet: it was removed above), so the classes
        # archived are those a session loads with the same JIT and collector.
        options = driver_jvm.java_options(f"-XX:ArchiveClassesAtExit={archive}",
                                          class_archive.QUIET)
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
