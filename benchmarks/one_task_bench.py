"""Benchmark: small AUTO CDC batches planned as one task (issue 58, auto_cdc/one_task.py), side
by side with Spark's own plan, in one warm session.

    .venv/bin/python benchmarks/one_task_bench.py [--pairs 8]

A warehouse built from a 1,000-event history (`_common.history_warehouse`), then updates of ~80
new events of both topics that alternate (`_common.ab_pairs`, ABBA) between side A, the update
as it is, and side B, with `one_task.ONE_TASK_MAX_BYTES` at -1, so every AUTO CDC batch is
planned as Spark plans it, as before. Both sides update the same warehouse. Printed per update:
the Spark jobs it ran (Spark's status store), wall s, driver JVM CPU s; then means, A / B and
the medians' ratio.
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
from pathlib import Path

from _common import ab_pairs, commit, counted_update, history_warehouse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()

    from exactly_once.local.auto_cdc import one_task
    limit = one_task.ONE_TASK_MAX_BYTES
    work = Path(tempfile.mkdtemp(prefix="one-task-bench-"))
    spark, pid, feed, settings = history_warehouse(work)
    seeds = itertools.count(1)

    def update(side: str) -> tuple[float, float]:
        one_task.ONE_TASK_MAX_BYTES = limit if side == "A" else -1
        return counted_update(spark, pid, feed, settings, work / "warehouse", next(seeds), side)

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    ab_pairs(update, args.pairs)
    spark.stop()


if __name__ == "__main__":
    main()
