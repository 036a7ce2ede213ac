"""Benchmark: what one session setting costs a warm update of the project's pipeline, side by
side with the session's own value, in one warm session.

    .venv/bin/python benchmarks/session_setting_bench.py KEY=VALUE [KEY=VALUE ...] [--pairs 8]

A warehouse built from a 1,000-event history (`_common.history_warehouse`), then updates of ~80
new events of both topics that alternate (`_common.ab_pairs`, ABBA) between side A, the
session as `engine/session.py` builds it, and side B, with the settings given. Both sides update
the same warehouse. Printed per update: the Spark jobs it ran (Spark's status store), wall s,
driver JVM CPU s; then means, A / B and the medians' ratio. For example, what Spark's batches
without data (Spark's default, kept since they change what a watermark emits) cost against
none: `spark.sql.streaming.noDataMicroBatches.enabled=false`.
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
    parser.add_argument("settings", nargs="+", metavar="KEY=VALUE")
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()
    side_b = dict(setting.split("=", 1) for setting in args.settings)

    work = Path(tempfile.mkdtemp(prefix="session-setting-bench-"))
    spark, pid, feed, settings = history_warehouse(work)
    side_a = {key: spark.conf.get(key, None) for key in side_b}
    seeds = itertools.count(1)

    def update(side: str) -> tuple[float, float]:
        for key, value in (side_a if side == "A" else side_b).items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
        return counted_update(spark, pid, feed, settings, work / "warehouse", next(seeds), side)

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"A: {side_a}, B: {side_b}")
    ab_pairs(update, args.pairs)
    spark.stop()


if __name__ == "__main__":
    main()
