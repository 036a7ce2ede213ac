"""Benchmark: the floor under a warm update (issue 58): the update's own Delta commits, each
replayed as the cheapest write Delta has, a blind append of as many rows into a table of the
same columns, in the same warm session.

    .venv/bin/python benchmarks/write_floor_bench.py [--rounds 6]

A warehouse built from a 1,000-event history (`_common.history_warehouse`) and two warm-up
updates; then each round is
1. an update of ~80 new events of both topics (the user's loop), measured: wall, driver JVM CPU,
   Spark jobs, and the commits it made (each Delta table's new versions under the warehouse:
   its operation and the rows it wrote, from the commit's `operationMetrics`);
2. the floor: for each of those commits, in the order they were made, one plain append of as
   many of the table's rows (at least one; read and held in the driver before the clock starts)
   into a scratch table of the table's columns, made in the warm-up: measured the same way.
The floor keeps nothing the pipeline needs beyond the commits' count and size: no streaming
query, no MERGE or replace, no row tracking, no AUTO CDC plan, one thread. Its CPU over the
machine's cores is what any runtime that writes these tables to Delta 4.4 spends at least; its
wall is that spent on one core, the longest a chain of these commits could take.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import commit, counted_update, history_warehouse, jvm_cpu, newest_job

ROW_METRICS = ("numOutputRows", "numAddedRows", "numTargetRowsInserted")


def delta_tables(warehouse: Path) -> list[Path]:
    return sorted(log.parent for log in warehouse.rglob("_delta_log"))


def commits_since(warehouse: Path, before: dict[Path, int]) -> list[tuple[float, Path, str, int]]:
    """(commit time, table, operation, rows written) of every version made after `before`."""
    from exactly_once.local.storage import delta_log

    made = []
    for table in delta_tables(warehouse):
        for version in delta_log.versions(str(table)):
            if version <= before.get(table, -1):
                continue
            info = delta_log.commit_info(str(table), version)
            metrics = info.get("operationMetrics") or {}
            rows = next((int(metrics[k]) for k in ROW_METRICS if k in metrics), 0)
            made.append((info.get("timestamp", 0) / 1000, table, info.get("operation", "?"), rows))
    return sorted(made, key=lambda c: c[0])


def latest_versions(warehouse: Path) -> dict[Path, int]:
    from exactly_once.local.storage import delta_log

    return {table: delta_log.latest_version(str(table)) for table in delta_tables(warehouse)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="write-floor-bench-"))
    spark, pid, feed, settings = history_warehouse(work)
    warehouse = work / "warehouse"
    seeds = itertools.count(1)
    for _ in range(2):
        counted_update(spark, pid, feed, settings, warehouse, next(seeds), "warm-up")

    def floor_of(made: list[tuple[float, Path, str, int]]) -> list[tuple[str, Any]]:
        """(scratch table, the rows of its append), read before the clock starts."""
        appends = []
        for _, table, _, rows in made:
            source = spark.read.format("delta").load(str(table))
            held = spark.createDataFrame(source.limit(max(rows, 1)).collect(), source.schema)
            appends.append((str(work / "floor" / table.relative_to(warehouse)), held))
        return appends

    def run_floor(appends: list[tuple[str, Any]]) -> tuple[float, float, int]:
        first = newest_job(spark)
        cpu, began = jvm_cpu(pid), time.monotonic()
        for path, rows in appends:
            rows.write.format("delta").mode("append").save(path)
        wall, cpu = time.monotonic() - began, jvm_cpu(pid) - cpu
        return wall, cpu, newest_job(spark) - first

    # The warm-up's commits make the scratch tables, so that every measured append is to a
    # table that exists, as an update's are.
    before = latest_versions(warehouse)
    counted_update(spark, pid, feed, settings, warehouse, next(seeds), "warm-up")
    run_floor(floor_of(commits_since(warehouse, before)))

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    updates, floors = [], []
    for _ in range(args.rounds):
        before = latest_versions(warehouse)
        first = newest_job(spark)
        wall, cpu = counted_update(spark, pid, feed, settings, warehouse, next(seeds), "update")
        jobs = newest_job(spark) - first
        made = commits_since(warehouse, before)
        floor = run_floor(floor_of(made))
        updates.append((wall, cpu, jobs))
        floors.append(floor)
        print(f"update {wall:5.2f} s, JVM CPU {cpu:5.2f} s, {jobs} jobs, {len(made)} commits "
              f"({sum(c[3] for c in made)} rows); floor {floor[0]:5.2f} s, JVM CPU "
              f"{floor[1]:5.2f} s, {floor[2]} jobs", flush=True)
    print("the last update's commits, in order:")
    for at, table, operation, rows in made:
        print(f"  {at - made[0][0]:5.2f} {table.relative_to(warehouse)}: {operation}, {rows} rows")
    cores = os.cpu_count() or 1
    for k, measure in enumerate(("wall", "JVM CPU", "Spark jobs")):
        u = statistics.median(r[k] for r in updates)
        f = statistics.median(r[k] for r in floors)
        print(f"{measure}: update {u:.2f}, floor {f:.2f}, floor / update {f / u:.3f} (medians)")
    floor_cpu = statistics.median(r[1] for r in floors)
    print(f"the floor's JVM CPU over {cores} cores: {floor_cpu / cores:.2f} s of wall at least; "
          f"load at the end {os.getloadavg()[0]:.1f}")
    spark.stop()


if __name__ == "__main__":
    main()
