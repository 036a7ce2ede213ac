"""Benchmark: streaming flows with nothing new to read not started (issue 58,
execution/unread.py), side by side with starting every query, in one warm session.

    .venv/bin/python benchmarks/unread_streams_bench.py [--pairs 6] [--mode none|orders|both]

Two warehouses over the same 1,000-event history and the same ~80-event parts (`_common.Feed`,
the file source). Side A runs the update as it is; side B with `unread.nothing_unread` answering
False, so every streaming query starts, as before. The sides alternate (ABBA), so both see the
same machine. `--mode none` adds no records: the update finds nothing new anywhere (a rerun, a
continuous run's idle trigger). `--mode orders` keeps only the orders topic's records of each new
part: bronze and both parses read something, the rewards topic's silver, quarantine, ledger and
late events nothing. `--mode both` keeps both topics: every flow has news, and the ratio is the
check's own cost. Printed per update: wall s, driver JVM CPU s, the flows SKIPPED; then means,
A / B and the medians' ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from _common import Feed, commit, jvm_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--mode", choices=("none", "orders", "both"), default="none")
    args = parser.parse_args()

    from exactly_once.local.engine.session import build_session
    from exactly_once.local.execution import unread
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.settings.pipeline import load_settings

    nothing_unread = unread.nothing_unread
    work = Path(tempfile.mkdtemp(prefix="unread-streams-bench-"))
    spark = build_session(work / "spark")
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    feed = Feed.for_history(work / "feed", 1000)
    feed.append(1000, seed=1000)
    settings = replace(load_settings("local"), source=feed.source)

    def update(side: str) -> tuple[float, float, int]:
        unread.nothing_unread = nothing_unread if side == "A" else (  # type: ignore[assignment]
            lambda *_: False)
        cpu, began = jvm_cpu(pid), time.monotonic()
        result = run_pipeline(spark, settings, work / side)
        skipped = sum(f.status == "SKIPPED" and f.kind != "materialized_view"
                      for f in result.flows)
        return time.monotonic() - began, jvm_cpu(pid) - cpu, skipped

    def next_part(seed: int) -> None:
        if args.mode == "none":
            return
        feed.append(80, seed=seed)
        if args.mode == "orders":
            part = sorted(feed.directory.glob("part-*.jsonl"))[-1]
            kept = [line for line in part.read_text().splitlines()
                    if json.loads(line).get("topic") == "orders"]
            part.write_text("\n".join(kept) + "\n")

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"mode {args.mode}")
    for side in "AB":  # the history
        update(side)
    next_part(1)
    for side in "AB":  # the first update after it: not measured
        update(side)
    rows: dict[str, list[tuple[float, float, int]]] = {"A": [], "B": []}
    for i in range(args.pairs):
        next_part(i + 2)
        for side in ("AB" if i % 2 == 0 else "BA"):
            rows[side].append(update(side))
            wall, cpu, skipped = rows[side][-1]
            print(f"{side} wall {wall:6.2f} s, JVM CPU {cpu:6.2f} s, "
                  f"streaming flows skipped {skipped}", flush=True)
    for k, measure in enumerate(("wall", "JVM CPU")):
        a, b = ([r[k] for r in rows[side]] for side in "AB")
        print(f"{measure}: A {statistics.mean(a):.2f} s, B {statistics.mean(b):.2f} s, "
              f"A / B {statistics.mean(a) / statistics.mean(b):.3f} "
              f"(medians {statistics.median(a) / statistics.median(b):.3f})")
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    spark.stop()


if __name__ == "__main__":
    main()
