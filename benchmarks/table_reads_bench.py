"""Benchmark: reading a new warehouse's tables back once, as a test does after an update, by
Delta's reader and as the Parquet files each table's log names (`snapshot_files.read_latest`:
`show`, `events`, the test harness's `snapshot`, the crash and property tests).

    .venv/bin/python benchmarks/table_reads_bench.py [--pairs 4]

One warm session; one update of the crash sweep's two dozen records into a warehouse, then
each round reads every table of a new copy of it (a table the session has not read at its
version, as after each test's update), all columns, collected. The two readers alternate (ABBA)
after a warm-up pair. Printed per round: wall s, driver JVM CPU s and rows; then the means and
read_latest / Delta.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import REPO, commit, jvm_cpu

sys.path.insert(0, str(REPO / "tests"))
from crash_points import TABLES, write_tiny_dump  # noqa: E402 - the crash sweep's feed and tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=4)
    args = parser.parse_args()

    from pyspark.sql import DataFrame

    from exactly_once.local.engine.session import build_session
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.local.storage.snapshot_files import read_latest
    from exactly_once.settings.pipeline import load_settings

    work = Path(tempfile.mkdtemp(prefix="table-reads-bench-"))
    spark = build_session(work / "spark")
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    dump = write_tiny_dump(work / "stream.jsonl")
    warehouse = work / "warehouse"
    run_pipeline(spark, load_settings("local", overrides={"exactly_once.source": f"file:{dump}"}),
                 warehouse)
    readers: dict[str, Callable[[str], DataFrame]] = {
        "delta": lambda path: spark.read.format("delta").load(path),
        "files": lambda path: read_latest(spark, path),
    }
    rounds = 0

    def read_back(reader: str) -> tuple[float, float, int]:
        nonlocal rounds
        copy, rounds = work / f"copy-{rounds}", rounds + 1
        shutil.copytree(warehouse, copy)
        cpu, began = jvm_cpu(pid), time.monotonic()
        rows = sum(len(readers[reader](str(copy / table)).collect()) for table in TABLES)
        measured = time.monotonic() - began, jvm_cpu(pid) - cpu, rows
        shutil.rmtree(copy)
        return measured

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{len(TABLES)} tables")
    for reader in ("delta", "files"):  # the session's first reads of each kind: not measured
        read_back(reader)
    found: dict[str, list[tuple[float, float, int]]] = {"delta": [], "files": []}
    for pair in range(args.pairs):
        for reader in (("delta", "files") if pair % 2 == 0 else ("files", "delta")):
            wall, cpu, rows = read_back(reader)
            found[reader].append((wall, cpu, rows))
            print(f"  {reader:5s}  {wall:6.2f} s  JVM CPU {cpu:6.2f} s  {rows} rows", flush=True)
    spark.stop()
    shutil.rmtree(work)
    assert {r[2] for r in found["delta"]} == {r[2] for r in found["files"]}, "different rows"
    for i, measure in enumerate(("wall s", "JVM CPU s")):
        delta = statistics.mean(r[i] for r in found["delta"])
        files = statistics.mean(r[i] for r in found["files"])
        print(f"{measure}: Delta's reader {delta:.2f}, the log's files {files:.2f}, "
              f"files / Delta {files / delta:.3f}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
