"""Benchmark: the runtime's own tables (AUTO CDC state, SCD2 journals, the event log) with Delta's
file statistics kept to the columns it reads (`warehouse.statistics_of`) against Delta's
default, the first 32 columns (what they had before).

    .venv/bin/python benchmarks/own_statistics_bench.py [--pairs 8]

One warm session, as the suite's: new warehouses over one 30-event feed, the two ways
alternated (ABBA) after a warm-up of each. Each write pays an analysis of the statistics'
expression over every column it keeps statistics of, so the figure is first those writes' own
spans (the timeline's state and journal appends: wall and the driver thread's CPU; the event
log's append: wall), then the whole update's driver JVM CPU, where the rest of the update's
noise hides most of it. Printed per update, then the medians and kept / default.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from _common import commit, driver_pid, feed_settings, jvm_cpu, suite_session

OWN_WRITES = ("state append", "journal append")
MEASURES = ("own writes' wall", "own writes' driver CPU", "event log's wall", "update's JVM CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()

    from exactly_once.local.auto_cdc import scd1, scd2
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.local.observe import event_log
    from exactly_once.local.observe.timeline import Timeline
    from exactly_once.local.storage import warehouse

    def delta_default(columns: Sequence[str]) -> dict[str, str]:
        return {}

    ways: dict[str, Callable[[Sequence[str]], dict[str, str]]] = {
        "kept": warehouse.statistics_of, "default": delta_default}
    work = Path(tempfile.mkdtemp(prefix="own-statistics-bench-"))
    spark = suite_session(work)
    pid = driver_pid(spark)
    settings = feed_settings(work, 30)
    found: dict[str, list[tuple[float, ...]]] = {way: [] for way in ways}
    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    order = ["kept", "default", "default", "kept"] + [
        way for i in range(args.pairs) for way in (("kept", "default") if i % 2 == 0
                                                   else ("default", "kept"))]
    for n, way in enumerate(order):
        scd1.statistics_of = scd2.statistics_of = event_log.statistics_of = ways[way]
        timeline = Timeline(spark_jobs=True)  # the spans' driver CPU with it
        cpu, began = jvm_cpu(pid), time.monotonic()
        run_pipeline(spark, settings, work / f"warehouse-{n}", timeline=timeline)
        update_cpu, wall = jvm_cpu(pid) - cpu, time.monotonic() - began
        costs = timeline.top_costs(1000)
        own = [c for c in costs if c.phase in OWN_WRITES]
        row = (sum(c.seconds for c in own), sum(c.driver_cpu_seconds or 0.0 for c in own),
               sum(c.seconds for c in costs if c.phase == "event log"), update_cpu)
        print(f"  {way:8s} update {wall:5.2f} s; " +
              ", ".join(f"{m} {v:.3f} s" for m, v in zip(MEASURES, row, strict=True)),
              flush=True)
        if n >= 4:
            found[way].append(row)
        shutil.rmtree(work / f"warehouse-{n}")
    spark.stop()
    shutil.rmtree(work)
    print(f"medians of {args.pairs} pairs; kept / default:")
    for k, measure in enumerate(MEASURES):
        kept, default = (statistics.median(r[k] for r in found[way]) for way in ways)
        print(f"  {measure:24s} {kept:6.3f} s / {default:6.3f} s = {kept / default:.3f}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
