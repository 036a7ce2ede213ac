"""Benchmark: a new target's snapshots applied in memory and written as one append
(`from_snapshot/flow.py`'s `first_snapshots`), side by side with an append of the first and a
MERGE of each next one, in one warm session.

    .venv/bin/python benchmarks/snapshot_fold_bench.py [--pairs 8] [--events 30]

Each update is a new warehouse's first over the same small feed (`_common.Feed`, the file
source) and the sample's two players exports (conf/'s `exports.players`): what most of the
suite's tests and a developer's first run pay, `players_history` beside the Kafka flows. Side A
as it is; side B with `first_snapshots` declining, so the snapshots go one by one (the first
appended, the second MERGEd). The sides alternate (ABBA) after a warm-up of each, so both see
the same machine. Printed per update: wall s and driver JVM CPU s; then means, medians and
A / B.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from _common import ab_pairs, commit, feed_settings, suite_session, timed_update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--events", type=int, default=30)
    args = parser.parse_args()

    from exactly_once.local.auto_cdc.from_snapshot import flow

    folded = flow.first_snapshots

    def one_by_one(*_: Any) -> tuple[list[Any], bool]:
        return [], False

    work = Path(tempfile.mkdtemp(prefix="snapshot-fold-bench-"))
    spark = suite_session(work)
    settings = feed_settings(work, args.events)
    updates = 0

    def update(side: str) -> tuple[float, float]:
        nonlocal updates
        flow.first_snapshots = folded if side == "A" else one_by_one  # type: ignore[assignment]
        warehouse, updates = work / f"{side}{updates}", updates + 1
        return timed_update(spark, settings, warehouse)

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{args.events} events")
    ab_pairs(update, args.pairs)
    flow.first_snapshots = folded  # type: ignore[assignment]
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
