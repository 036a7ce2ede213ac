"""Benchmark: a new warehouse's update in a warm session, its tables' names in the session
catalog moved to it by changing each entry's location (`session_entries.point_at`, what an update
does) or by DROP TABLE and CREATE TABLE ... LOCATION (what it did before: each loads the
table through Delta's catalog).

    .venv/bin/python benchmarks/catalog_entries_bench.py [--pairs 8]

One warm session, as a test file's: every update is the crash sweep's two dozen records into a
new warehouse, so every one of its 13 published tables is a name the previous update's
warehouse held. The two ways alternate (ABBA) after two warm-up pairs. Printed per update:
wall s, driver JVM CPU s; then the means and location / DROP + CREATE.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import REPO, commit, suite_session, timed_update

sys.path.insert(0, str(REPO / "tests"))
from crash_points import write_tiny_dump  # noqa: E402 - the crash sweep's feed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    args = parser.parse_args()

    from exactly_once.local.storage import session_entries
    from exactly_once.settings.pipeline import load_settings

    work = Path(tempfile.mkdtemp(prefix="catalog-entries-bench-"))
    spark = suite_session(work)
    settings = load_settings("local", overrides={
        "exactly_once.source": f"file:{write_tiny_dump(work / 'stream.jsonl')}"})
    ways = {"location": session_entries.point_at, "drop+create": lambda *_: False}
    updates = 0

    def update(way: str) -> tuple[float, float]:
        nonlocal updates
        session_entries.point_at = ways[way]
        target, updates = work / f"warehouse-{updates}", updates + 1
        return timed_update(spark, settings, target)

    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for _ in range(2):  # the session's first updates: not measured
        for way in ways:
            update(way)
    found: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for pair in range(args.pairs):
        for way in (("location", "drop+create") if pair % 2 else ("drop+create", "location")):
            wall, cpu = update(way)
            found[way].append((wall, cpu))
            print(f"  {way:11s}  {wall:6.2f} s  JVM CPU {cpu:6.2f} s", flush=True)
    session_entries.point_at = ways["location"]
    spark.stop()
    shutil.rmtree(work)
    for i, measure in enumerate(("wall s", "JVM CPU s")):
        moved, recreated = (statistics.mean(r[i] for r in found[way]) for way in ways)
        print(f"{measure}: location {moved:.2f}, DROP + CREATE {recreated:.2f}, "
              f"location / DROP + CREATE {moved / recreated:.3f}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
