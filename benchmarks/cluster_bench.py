"""Benchmark: a 200,000-event update on a 2-worker standalone cluster next to local[2].

    .venv/bin/python benchmarks/cluster_bench.py                    # 200,000 events
    .venv/bin/python benchmarks/cluster_bench.py --events 20000     # a quicker look

Same machine, same run, same kcat dump: `exactly-once run --source file:F --warehouse W --quiet`
as a whole process, first with the default master (local[2]), then with `--master` the cluster
this script starts (`cluster.start`: a master and two one-core workers on 127.0.0.1, free
ports, under a temporary home; stopped at the end). Prints the commit (+dirty if src/ or
pipelines/ differ from it), each run's wall clock and the update's own seconds, the ratio
cluster / local, and whether the two warehouses hold the same gold tables (compared row by
row in a local session). On 2 cores the cluster has no more cores than local[2]: the point is
that the same pipeline runs there, with the same result; the ratio is what the executors'
processes and the network between them cost.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit, stream_records

from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.engine.session import build_session
from exactly_once.services import cluster
from exactly_once.services.processes import free_port

GOLD = ("orders", "orders_history", "player_xp_ledger", "player_xp", "late_events")


def run(source: Path, warehouse: Path, home: Path, master: str | None) -> tuple[float, float]:
    """One update as a whole process: (wall seconds, the update's own seconds)."""
    args = [sys.executable, "-m", "exactly_once.cli", "run", "--quiet", "--source",
            f"file:{source}", "--warehouse", str(warehouse), *(["--master", master] if master
                                                               else [])]
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO,
                          env=os.environ | {"EXACTLY_ONCE_HOME": str(home)})
    wall = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed: {done.stderr.strip()}")
    found = re.search(r"Update finished in ([\d.]+)s", done.stdout)
    return wall, float(found.group(1)) if found else float("nan")


def same_gold(local: Path, on_cluster: Path) -> bool:
    spark = build_session(local, log_level="OFF")
    try:
        for table in GOLD:
            a = spark.read.format("delta").load(str(local / table))
            b = spark.read.format("delta").load(str(on_cluster / table))
            if a.exceptAll(b).count() or b.exceptAll(a).count():
                print(f"  {table}: the two runs differ")
                return False
        return True
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    print(f"commit {commit()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as scratch:
        root = Path(scratch)
        dump = root / "stream.jsonl"
        records = stream_records(args.events)
        write_kcat_jsonl(dump, records)
        print(f"{len(records):,} records ({args.events:,} events)")
        local = run(dump, root / "local", root / "home", None)
        print(f"local[2]:          {local[0]:7.1f} s whole process, update {local[1]:.1f} s")
        info = cluster.start(root / "cluster", port=free_port())
        try:
            on_cluster = run(dump, root / "on-cluster", root / "home", info.url)
        finally:
            cluster.stop(info.home)
        print(f"2-worker cluster:  {on_cluster[0]:7.1f} s whole process, update "
              f"{on_cluster[1]:.1f} s")
        print(f"ratio cluster / local[2]: {on_cluster[0] / local[0]:.2f} (whole process), "
              f"{on_cluster[1] / local[1]:.2f} (update)")
        print(f"same gold tables: {same_gold(root / 'local', root / 'on-cluster')}")
        print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
