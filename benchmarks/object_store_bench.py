"""Benchmark: a new warehouse's first update on the object store (versitygw on loopback, as the
suite's), against the same on local disk, or against a baseline checkout on the store.

    .venv/bin/python benchmarks/object_store_bench.py [--pairs 2]
    .venv/bin/python benchmarks/object_store_bench.py --baseline /path/to/checkout [--pairs 3]

Each run is an `exactly-once run` process (`local[2]`, C1 alone, as the suite starts them) of
one 500-event dump (630 records, both topics) into a new warehouse, with `PYTHONPATH=<tree>/src`.
Without `--baseline`: this tree on local disk and on the store, alternated. With it: this tree
and the baseline's, both on the store, alternated. Printed per run: its wall seconds and the
machine's CPU seconds over it (the process, its JVM and the store's server: `/proc/stat`, so run
it on a quiet machine), then the means and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
from exactly_once.services import s3_server
from exactly_once.services.processes import free_port


def busy_seconds() -> float:
    """CPU seconds the machine has spent busy (not idle, not waiting for I/O) since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def run(tree: Path, dump: Path, warehouse: str, home: Path,
        env: dict[str, str]) -> tuple[float, float]:
    """One `exactly-once run` of `tree`: (wall seconds, the machine's busy CPU seconds)."""
    began, busy = time.monotonic(), busy_seconds()
    done = subprocess.run(
        [sys.executable, "-m", "exactly_once.cli", "run", "--quiet", "--source", f"file:{dump}",
         "--warehouse", warehouse], capture_output=True, text=True, env=os.environ | env | {
            "PYTHONPATH": str(tree / "src"), "EXACTLY_ONCE_HOME": str(home),
            "EXACTLY_ONCE_JIT": "c1"})
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr.strip()[-2000:]}")
    return time.monotonic() - began, busy_seconds() - busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="a checkout of another commit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="object-store-bench-") as scratch:
        root = Path(scratch)
        dump = root / "stream.jsonl"
        write_kcat_jsonl(dump, as_consumed(generate_stream(GeneratorConfig(
            events=500, orders=40, players=12, seed=31))))
        server = s3_server.start(root / "s3", port=free_port())
        store = f"s3a://{server.bucket}"
        sides = ({"this": (REPO, store), "baseline": (args.baseline.resolve(), store)}
                 if args.baseline else {"store": (REPO, store), "disk": (REPO, str(root))})
        (a, b), rows = sides, {side: [] for side in sides}
        try:
            for pair in range(args.pairs):
                for side in ((a, b) if pair % 2 == 0 else (b, a)):
                    tree, where = sides[side]
                    wall, cpu = run(tree, dump, f"{where}/{side}-{pair}",
                                    root / f"home-{side}-{pair}", server.environment())
                    rows[side].append((wall, cpu))
                    print(f"pair {pair + 1} {side:8} wall {wall:6.1f} s, machine CPU {cpu:6.1f} s",
                          flush=True)
        finally:
            s3_server.stop(root / "s3")
    print(f"commit {commit()}" + (f", baseline {args.baseline}" if args.baseline else ""))
    for index, measure in enumerate(("wall", "machine CPU")):
        mean = {side: statistics.mean(r[index] for r in rows[side]) for side in rows}
        print(f"{measure}: {a} {mean[a]:.1f} s, {b} {mean[b]:.1f} s, "
              f"{a} / {b} {mean[a] / mean[b]:.3f}")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
