"""Benchmark: a new warehouse's tables from the first commit Delta wrote for the same definition
(storage/table_templates.py), side by side with creating each through Delta, in one warm session.

    .venv/bin/python benchmarks/table_templates_bench.py [--pairs 10] [--events 30]

Each update is a new warehouse's first over the same small feed (`_common.Feed`, the file
source): what most of the suite's and a developer's tests run, about 20 tables created. Side A
as it is; side B with `table_templates.replay` declining, so every table goes through Delta's
`CREATE TABLE`. The sides alternate (ABBA) after a warm-up pair, so both see the same machine.
Printed per update: wall s and driver JVM CPU s; then means, medians and A / B.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from _common import ab_pairs, commit, feed_settings, timed_update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--events", type=int, default=30)
    args = parser.parse_args()

    from exactly_once.local.engine.session import build_session
    from exactly_once.local.storage import table_templates

    replay = table_templates.replay
    work = Path(tempfile.mkdtemp(prefix="table-templates-bench-"))
    spark = build_session(work / "spark")
    settings = feed_settings(work, args.events)
    updates = 0

    def update(side: str) -> tuple[float, float]:
        nonlocal updates
        table_templates.replay = replay if side == "A" else (lambda *_: False)  # type: ignore[assignment]
        warehouse, updates = work / f"{side}{updates}", updates + 1
        return timed_update(spark, settings, warehouse)

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{args.events} events")
    ab_pairs(update, args.pairs)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
