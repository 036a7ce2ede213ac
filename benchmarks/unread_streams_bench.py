"""Benchmark: streaming flows with nothing new to read not started (issue 58,
execution/unread.py), side by side with starting every query, in one warm session.

    .venv/bin/python benchmarks/unread_streams_bench.py [--pairs 6] [--mode none|orders|both]

A warehouse built from a 1,000-event history (`_common.history_warehouse`), then updates that
alternate (`_common.ab_pairs`, ABBA) between side A, the update as it is, and side B, with
`unread.nothing_unread` answering False, so every streaming query starts, as before. A query
started with nothing to read leaves its checkpoint as a skipped one does, so both sides update
the same warehouse. `--mode none` adds no records: the update finds nothing new anywhere (a
rerun, a continuous run's idle trigger). `--mode orders` adds ~80 events of the orders topic
only: bronze and both parses read something; the rewards topic's silver, quarantine, ledger and
late events nothing. `--mode both` adds ~80 events of both topics: every flow has news, and the
ratio is the check's own cost. Printed per update: the streaming flows SKIPPED, wall s, driver
JVM CPU s; then means, A / B and the medians' ratio.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

from _common import Feed, ab_pairs, commit, history_warehouse, jvm_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--mode", choices=("none", "orders", "both"), default="none")
    args = parser.parse_args()

    from exactly_once.local.execution import unread
    from exactly_once.local.execution.pipeline import run_pipeline

    nothing_unread = unread.nothing_unread
    work = Path(tempfile.mkdtemp(prefix="unread-streams-bench-"))
    spark, pid, feed, settings = history_warehouse(work)
    seeds = itertools.count(1)

    def update(side: str) -> tuple[float, float]:
        unread.nothing_unread = nothing_unread if side == "A" else (  # type: ignore[assignment]
            lambda *_: False)
        next_part(feed, args.mode, next(seeds))
        cpu, began = jvm_cpu(pid), time.monotonic()
        result = run_pipeline(spark, settings, work / "warehouse")
        wall, cpu = time.monotonic() - began, jvm_cpu(pid) - cpu
        skipped = sum(f.status == "SKIPPED" and f.kind != "materialized_view"
                      for f in result.flows)
        print(f"  streaming flows skipped: {skipped}")
        return wall, cpu

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"mode {args.mode}")
    ab_pairs(update, args.pairs)
    spark.stop()


def next_part(feed: Feed, mode: str, seed: int) -> None:
    """The feed's next part of ~80 events, of the orders topic only in mode `orders`; none in
    mode `none`."""
    if mode == "none":
        return
    feed.append(80, seed=seed)
    if mode == "orders":
        part = sorted(feed.directory.glob("part-*.jsonl"))[-1]
        kept = [line for line in part.read_text().splitlines()
                if json.loads(line).get("topic") == "orders"]
        part.write_text("\n".join(kept) + "\n")


if __name__ == "__main__":
    main()
