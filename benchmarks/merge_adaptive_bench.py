"""Benchmark: the runtime's MERGEs without adaptive execution (what `idempotent.merge` does)
against with it (what it did before), in the user's loop: warm updates of an existing warehouse.

    .venv/bin/python benchmarks/merge_adaptive_bench.py [--pairs 8]

One warm session, as the suite's: a warehouse built from a 1,000-event history, then updates of
80 new events each (`update_cost_bench.py`'s feed), every one MERGEing into `orders`. The two
ways alternate (ABBA) after two warm-up pairs. Printed per update: wall s, driver JVM CPU s, the
seconds of its MERGE steps (the timeline's "target merge"); then the means and
without / with.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from _common import commit, history_warehouse, jvm_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()

    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.local.observe.timeline import Timeline
    from exactly_once.local.storage import idempotent

    without = idempotent.set_for_block

    def with_adaptive(session: Any, values: Mapping[str, str]
                      ) -> AbstractContextManager[Iterator[None]]:
        return without(session, {k: v for k, v in values.items() if k != idempotent.ADAPTIVE})

    ways = {"without": without, "with": with_adaptive}
    work = Path(tempfile.mkdtemp(prefix="merge-adaptive-bench-"))
    spark, pid, feed, settings = history_warehouse(work)
    updates = 0

    def update(way: str) -> tuple[float, float, float]:
        nonlocal updates
        idempotent.set_for_block = ways[way]  # type: ignore[assignment]
        feed.append(80, seed=100 + updates)
        updates += 1
        timeline = Timeline()
        cpu, began = jvm_cpu(pid), time.monotonic()
        run_pipeline(spark, settings, work / "warehouse", timeline=timeline)
        merges = sum(s.seconds for s in timeline.spans if s.phase == "target merge")
        return time.monotonic() - began, jvm_cpu(pid) - cpu, merges

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for _ in range(2):  # the session's first updates: not measured
        for way in ways:
            update(way)
    found: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
    for pair in range(args.pairs):
        for way in (("without", "with") if pair % 2 else ("with", "without")):
            taken = update(way)
            found[way].append(taken)
            print(f"  {way:8s} {taken[0]:6.2f} s  JVM CPU {taken[1]:6.2f} s  "
                  f"MERGE {taken[2]:5.2f} s", flush=True)
    idempotent.set_for_block = without  # type: ignore[assignment]
    spark.stop()
    shutil.rmtree(work)
    for i, measure in enumerate(("wall s", "JVM CPU s", "MERGE s")):
        off, on = (statistics.mean(r[i] for r in found[way]) for way in ways)
        print(f"{measure}: without {off:.2f}, with {on:.2f}, without / with {off / on:.3f}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
