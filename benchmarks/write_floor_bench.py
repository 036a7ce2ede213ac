"""Benchmark: the floor under a warm update (issue 58): the update's own Delta commits, each
replayed as the cheapest write Delta has, a blind append of as many rows into a table of the
same columns, in the same warm session.

    .venv/bin/python benchmarks/write_floor_bench.py [--rounds 6] [--new [--events 30]]

A warehouse built from a 1,000-event history (`_common.history_warehouse`) and three warm-up
rounds; then each round is
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

`--new`: each round is instead a new warehouse's first update over one small feed (`--events`
generated events, `_common.feed_settings`), what most of the suite's tests run. In either, a
commit of metadata alone (a table's creation, a column added) counts as nothing in the floor.

`--stream 200000 --rounds 1`: issue 58's throughput target. The update reads the `throughput`
part's stream (`_common.stream_records`: 20% duplicates, 10% out of order, 1% malformed) into a
new warehouse, after a warm-up of 2,000 events; then, as processes, a bare session's start and
stop and the raw append of the same file (`update_cost_bench.py`'s). A pipeline process takes at
least the bare session and its commits' floor, so raw / pipeline cannot pass raw / that sum.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    commit,
    counted_update,
    driver_pid,
    feed_settings,
    history_warehouse,
    jvm_cpu,
    newest_job,
    stream_records,
    suite_session,
)

from exactly_once.kafka.kcat import write_kcat_jsonl

# Rows read into the driver before the clock starts; more are held in Spark's block manager.
HELD_IN_THE_DRIVER = 20_000
# Commits that write no data file: the floor counts them as nothing.
METADATA_ONLY = frozenset({"CREATE TABLE", "CREATE OR REPLACE TABLE", "ADD COLUMNS",
                           "CHANGE COLUMN", "SET TBLPROPERTIES"})
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
    parser.add_argument("--new", action="store_true",
                        help="each round a new warehouse's first update, as most tests run")
    parser.add_argument("--events", type=int, default=30, help="--new: the feed's events")
    parser.add_argument("--stream", type=int, metavar="EVENTS",
                        help="new warehouses' updates of the throughput part's stream of EVENTS "
                             "events, against its raw append and a bare session, as processes")
    args = parser.parse_args()

    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.settings.pipeline import load_settings

    work = Path(tempfile.mkdtemp(prefix="write-floor-bench-"))
    streams = {}
    if args.stream:  # warmed up on a small stream of the same shape
        for name, events in (("warm-up", 2_000), ("update", args.stream)):
            streams[name] = work / f"stream_{events}.jsonl"
            write_kcat_jsonl(streams[name], stream_records(events))
    if args.new or args.stream:
        spark = suite_session(work)
        # --stream's updates read their stream's file (`update`), not a feed
        settings = None if args.stream else feed_settings(work, args.events)
        pid, feed = driver_pid(spark), None
    else:
        spark, pid, feed, settings = history_warehouse(work)
    rounds = itertools.count(1)
    cores = os.cpu_count() or 1

    def update(side: str) -> tuple[float, float, int, Path, list]:
        """One measured update: wall, JVM CPU, Spark jobs, its warehouse and its commits."""
        nonlocal settings
        first, number = newest_job(spark), next(rounds)
        if streams:
            settings = replace(load_settings("local"), source=f"file:{streams[side]}")
        if args.new or args.stream:
            warehouse = work / f"new{number}"
            cpu, began = jvm_cpu(pid), time.monotonic()
            run_pipeline(spark, settings, warehouse)
            wall, cpu = time.monotonic() - began, jvm_cpu(pid) - cpu
            before: dict[Path, int] = {}
        else:
            warehouse = work / "warehouse"
            before = latest_versions(warehouse)
            wall, cpu = counted_update(spark, pid, feed, settings, warehouse, number, side)
        return wall, cpu, newest_job(spark) - first, warehouse, commits_since(warehouse, before)

    def floor_of(warehouse: Path, made: list) -> list[tuple[str, Any]]:
        """(scratch table, the rows of its append), read before the clock starts. A commit of
        metadata alone (a table's creation, which the runtime writes as a copy of a template,
        storage/table_templates.py; a column added) counts as nothing."""
        appends = []
        for _, table, operation, rows in made:
            if operation in METADATA_ONLY:
                continue
            source = spark.read.format("delta").load(str(table)).limit(max(rows, 1))
            held = (source.repartition(cores).localCheckpoint() if rows > HELD_IN_THE_DRIVER
                    else spark.createDataFrame(source.collect(), source.schema))
            appends.append((str(work / "floor" / table.relative_to(warehouse)), held))
        return appends

    def run_floor(appends: list[tuple[str, Any]]) -> tuple[float, float, int]:
        first = newest_job(spark)
        cpu, began = jvm_cpu(pid), time.monotonic()
        for path, rows in appends:
            rows.write.format("delta").mode("append").save(path)
        wall, cpu = time.monotonic() - began, jvm_cpu(pid) - cpu
        for rdd in spark.sparkContext._jsc.getPersistentRDDs().values():  # the held rows
            rdd.unpersist(True)
        return wall, cpu, newest_job(spark) - first

    # The warm-up's commits make the scratch tables, so that every measured append is to a
    # table that exists, as an update's are.
    for _ in range(3):
        *_, warehouse, made = update("warm-up")
        run_floor(floor_of(warehouse, made))

    print(f"commit {commit()}, {cores} cores, load {os.getloadavg()[0]:.1f}, "
          + (f"new warehouses of a {args.stream:,}-event stream" if args.stream else
             f"new warehouses of {args.events} events" if args.new else "an existing warehouse"))
    updates, floors = [], []
    for _ in range(args.rounds):
        wall, cpu, jobs, warehouse, made = update("update")
        floor = run_floor(floor_of(warehouse, made))
        updates.append((wall, cpu, jobs))
        floors.append(floor)
        print(f"update {wall:5.2f} s, JVM CPU {cpu:5.2f} s, {jobs} jobs, {len(made)} commits "
              f"({sum(c[3] for c in made)} rows); floor {floor[0]:5.2f} s, JVM CPU "
              f"{floor[1]:5.2f} s, {floor[2]} jobs", flush=True)
    print("the last update's commits, in order:")
    for at, table, operation, rows in made:
        print(f"  {at - made[0][0]:5.2f} {table.relative_to(warehouse)}: {operation}, {rows} rows")
    for k, measure in enumerate(("wall", "JVM CPU", "Spark jobs")):
        u = statistics.median(r[k] for r in updates)
        f = statistics.median(r[k] for r in floors)
        print(f"{measure}: update {u:.2f}, floor {f:.2f}, floor / update {f / u:.3f} (medians)")
    floor_cpu = statistics.median(r[1] for r in floors)
    print(f"the floor's JVM CPU over {cores} cores: {floor_cpu / cores:.2f} s of wall at least; "
          f"load at the end {os.getloadavg()[0]:.1f}")
    spark.stop()
    if args.stream:  # issue 58's throughput target, bounded by the floor
        from update_cost_bench import BARE_SESSION, RAW_APPEND, process

        bare, _ = process(REPO, ["-c", BARE_SESSION, str(work / "bare_warehouse")])
        raw, _ = process(REPO, ["-c", RAW_APPEND, str(streams["update"]),
                                str(work / "raw_table")])
        least = bare + floor_cpu / cores
        print(f"processes: the raw append {raw:.1f} s, a bare session {bare:.1f} s; a pipeline "
              f"process takes at least the bare session and the floor's CPU over {cores} cores, "
              f"{least:.1f} s: raw / pipeline <= {raw / least:.2f}; load {os.getloadavg()[0]:.1f}")

if __name__ == "__main__":
    main()
