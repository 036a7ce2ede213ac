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
import time
from pathlib import Path
from typing import Any

from _common import ab_pairs, commit, history_warehouse, jvm_cpu


def newest_job(spark: Any) -> int:
    """The newest job's id in Spark's status store, once its listener bus has delivered every
    event so far."""
    from exactly_once.local.observe.timeline import last_job_id

    spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty()
    return last_job_id(spark)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()

    from exactly_once.local.auto_cdc import one_task
    from exactly_once.local.execution.pipeline import run_pipeline

    limit = one_task.ONE_TASK_MAX_BYTES
    work = Path(tempfile.mkdtemp(prefix="one-task-bench-"))
    spark, pid, feed, settings = history_warehouse(work)
    seeds = itertools.count(1)

    def update(side: str) -> tuple[float, float]:
        one_task.ONE_TASK_MAX_BYTES = limit if side == "A" else -1
        feed.append(80, seed=next(seeds))
        first = newest_job(spark)
        cpu, began = jvm_cpu(pid), time.monotonic()
        run_pipeline(spark, settings, work / "warehouse")
        wall, cpu = time.monotonic() - began, jvm_cpu(pid) - cpu
        print(f"  {side}: {newest_job(spark) - first} Spark jobs", flush=True)
        return wall, cpu

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    ab_pairs(update, args.pairs)
    spark.stop()


if __name__ == "__main__":
    main()
