"""Benchmark: materialized views not recomputed when their inputs did not change (issue 58,
road 2), side by side with recomputing them, in one warm session.

    .venv/bin/python benchmarks/unchanged_views_bench.py [--pairs 6] [--mode orders|both]

Two warehouses over the same 1,000-event history and the same ~80-event parts (`_common.Feed`,
the file source). Side A runs the update as it is; side B with execution/unchanged.py's
fingerprint off, so every materialized view is recomputed. The sides alternate (ABBA), so both
see the same machine. `--mode orders` keeps only the orders topic's records of each new part:
`player_xp` reads nothing new and A skips it. `--mode both` keeps both topics: `player_xp` is
recomputed on both sides, and the ratio is the fingerprint's own cost. Printed per update: wall
s, driver JVM CPU s, `player_xp`'s flow seconds and status; then means and A / B.
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
    parser.add_argument("--mode", choices=("orders", "both"), default="orders")
    args = parser.parse_args()

    from exactly_once.local.engine.session import build_session
    from exactly_once.local.execution import unchanged
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.settings.pipeline import load_settings

    fingerprint = unchanged.fingerprint
    work = Path(tempfile.mkdtemp(prefix="unchanged-views-bench-"))
    spark = build_session(work / "spark")
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    feed = Feed.for_history(work / "feed", 1000)
    feed.append(1000, seed=1000)
    settings = replace(load_settings("local"), source=feed.source)

    def update(side: str) -> tuple[float, float, float, str]:
        unchanged.fingerprint = fingerprint if side == "A" else (lambda *_: None)
        cpu, began = jvm_cpu(pid), time.monotonic()
        result = run_pipeline(spark, settings, work / side)
        xp = next(f for f in result.flows if f.flow == "player_xp")
        return time.monotonic() - began, jvm_cpu(pid) - cpu, xp.seconds, xp.status

    def next_part(seed: int) -> None:
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
    rows: dict[str, list[tuple[float, float, float, str]]] = {"A": [], "B": []}
    for i in range(args.pairs):
        next_part(i + 2)
        for side in ("AB" if i % 2 == 0 else "BA"):
            rows[side].append(update(side))
            wall, cpu, xp, status = rows[side][-1]
            print(f"{side} wall {wall:6.2f} s, JVM CPU {cpu:6.2f} s, "
                  f"player_xp {xp:5.2f} s {status}", flush=True)
    means = {side: [statistics.mean(r[k] for r in rows[side]) for k in range(3)] for side in "AB"}
    for side in "AB":
        print(f"{side}: wall {means[side][0]:.2f} s, JVM CPU {means[side][1]:.2f} s, "
              f"player_xp {means[side][2]:.2f} s (means)")
    print(f"A / B: wall {means['A'][0] / means['B'][0]:.3f}, "
          f"JVM CPU {means['A'][1] / means['B'][1]:.3f}; pairs favouring A: "
          f"{sum(a[0] < b[0] for a, b in zip(rows['A'], rows['B'], strict=True))} of {args.pairs}")
    spark.stop()


if __name__ == "__main__":
    main()
