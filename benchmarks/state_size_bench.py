"""Benchmark: does a warm update's cost follow its batch or the AUTO CDC state's size?

    .venv/bin/python benchmarks/state_size_bench.py                   # histories 1,000, 100,000
    .venv/bin/python benchmarks/state_size_bench.py --histories 1000,30000,100000 --pairs 6

For each history size, one process (this tree): a warehouse built from a history of that many
events (one update), then updates of ~100 new records each, as `update_cost_bench.py`'s warm
part makes them. After two unmeasured updates they alternate, update by update in the same
session, between the AUTO CDC flows' keyed state reads (`changes.state_of_keys`: a state table
of more rows than `KEYED_STATE_READ_MIN_ROWS` is read for the batch's keys only) and the
baseline, the same code with the limit out of reach (every batch reads and aggregates its
flow's whole state table, as before `state_of_keys`). Prints wall and driver JVM CPU seconds
per side, their ratio, and each side's growth against the smallest history.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from _common import REPO, commit
from update_cost_bench import process

SIDES = ("keyed", "whole")
UNMEASURED = 2


def worker(history: int, pairs: int, work: Path) -> None:
    """Prints one JSON line: {"keyed": [[wall, cpu], ...], "whole": [...]}."""
    from _common import Feed
    from update_cost_bench import Driver

    from exactly_once.local.auto_cdc import changes

    limit = changes.KEYED_STATE_READ_MIN_ROWS
    driver = Driver(work)
    feed = Feed.for_history(work / "feed", history)
    feed.append(history, seed=1000)
    driver.update(feed.source)
    measured: dict[str, list[list[float]]] = {side: [] for side in SIDES}
    order = [SIDES[i % 2] for i in range(UNMEASURED)] + [
        side for pair in range(pairs) for side in (SIDES if pair % 2 == 0 else SIDES[::-1])]
    for n, side in enumerate(order):
        changes.KEYED_STATE_READ_MIN_ROWS = limit if side == "keyed" else sys.maxsize
        feed.append(80, seed=n + 1)
        result = driver.update(feed.source)
        if n >= UNMEASURED:
            measured[side].append([result["seconds"], result["jvm_cpu"]])
    print(json.dumps(measured))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--histories", default="1000,100000")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--worker", nargs=3, metavar=("HISTORY", "PAIRS", "DIR"))
    args = parser.parse_args()
    if args.worker:
        worker(int(args.worker[0]), int(args.worker[1]), Path(args.worker[2]))
        return
    print(f"commit {commit()}; {args.pairs} pairs per history, each side's mean")
    print(f"{'history':>9} | {'keyed wall':>10} {'whole wall':>10} {'ratio':>6} | "
          f"{'keyed CPU':>9} {'whole CPU':>9} {'ratio':>6}")
    first: dict[str, float] = {}
    for history in (int(h) for h in args.histories.split(",")):
        work = Path(tempfile.mkdtemp(prefix=f"state-size-{history}-"))
        try:
            _, out = process(REPO, [str(Path(__file__).resolve()), "--worker", str(history),
                                    str(args.pairs), str(work)], timeout=3600)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        sides = json.loads(out.strip().splitlines()[-1])
        mean = {side: [sum(r[i] for r in sides[side]) / len(sides[side]) for i in (0, 1)]
                for side in SIDES}
        first = first or {side: mean[side][0] for side in SIDES}
        print(f"{history:>9,} | {mean['keyed'][0]:>10.2f} {mean['whole'][0]:>10.2f} "
              f"{mean['keyed'][0] / mean['whole'][0]:>6.3f} | {mean['keyed'][1]:>9.2f} "
              f"{mean['whole'][1]:>9.2f} {mean['keyed'][1] / mean['whole'][1]:>6.3f}   "
              f"growth from the first history: keyed "
              f"{mean['keyed'][0] / first['keyed']:.2f}, whole "
              f"{mean['whole'][0] / first['whole']:.2f}", flush=True)


if __name__ == "__main__":
    main()
