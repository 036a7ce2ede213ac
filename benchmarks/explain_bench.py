"""Benchmark: `exactly-once explain` on a laptop warehouse (issue 28), against whole-table reads.

    .venv/bin/python benchmarks/explain_bench.py                   # a 50,000-event warehouse
    .venv/bin/python benchmarks/explain_bench.py --warehouse DIR   # or one that exists

Two parts, both measured in the same run:

- in a warm session (what the dashboard's search and a notebook pay): `explain_key` for
  `--keys` orders and as many players, and the same explanations with every table read whole
  (the filters dropped; the verdicts filter in Python): the baseline, what explaining costs when
  the reads are not the key's.
- as processes (what a person at a shell pays): `exactly-once explain orders KEY` end to end,
  and `exactly-once show orders --limit 1` (the same Spark session start, one small read).

Prints the seconds (median of the keys), the ratios, the commit and the warehouse's size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit, du, mib, stream_records

from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.inspect import explain, explain_reads
from exactly_once.settings.pipeline import load_settings


def build_warehouse(root: Path, events: int) -> Path:
    dump, warehouse = root / "stream.jsonl", root / "warehouse"
    write_kcat_jsonl(dump, stream_records(events))
    spark = build_session(root / "build", log_level="OFF")
    started = time.monotonic()
    run_pipeline(spark, load_settings("local", overrides={
        "exactly_once.source": f"file:{dump}"}), warehouse)
    print(f"built a warehouse of {events:,} events in {time.monotonic() - started:.1f}s")
    spark.stop()
    return warehouse


def timed(action) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def whole_tables(df, where):
    """`explain_reads._collect` without its filter: every row of the table."""
    return [] if df is None else [r.asDict(recursive=True) for r in df.collect()]


def warm(warehouse: Path, keys: int) -> None:
    spark = build_session(warehouse, log_level="OFF")
    settings = load_settings("local")
    rng = random.Random(28)
    picks = {}
    for table, column in (("orders", "order_id"), ("player_xp", "player_id")):
        found = sorted(r[0] for r in spark.read.format("delta").load(
            str(warehouse / table)).select(column).collect())
        picks[table] = rng.sample(found, min(keys, len(found)))
    explain.explain_key(spark, warehouse, settings, "orders", picks["orders"][0])  # warm-up
    for table, chosen in picks.items():
        def one(key: str, table: str = table) -> float:
            return timed(lambda: explain.explain_key(spark, warehouse, settings, table, key))

        mine = [one(k) for k in chosen]
        collect = explain_reads._collect
        explain_reads._collect = whole_tables
        try:
            whole = [one(k) for k in chosen]
        finally:
            explain_reads._collect = collect
        filtered, reads = statistics.median(mine), statistics.median(whole)
        print(f"  {table:<10} one key, filtered reads   {filtered:6.2f}s  (median of "
              f"{len(chosen)})")
        print(f"  {table:<10} one key, whole tables     {reads:6.2f}s  -> filtered / whole = "
              f"{filtered / reads:.2f}")
    spark.stop()


def processes(warehouse: Path, key: str) -> None:
    cli = str(REPO / ".venv" / "bin" / "exactly-once")
    runs = {
        "explain orders KEY": [cli, "explain", "orders", key, "--warehouse", str(warehouse)],
        "show orders --limit 1": [cli, "show", "orders", "--limit", "1",
                                  "--warehouse", str(warehouse)],
    }
    seconds = {}
    for name, command in runs.items():
        seconds[name] = timed(lambda c=command: subprocess.run(
            c, check=True, capture_output=True, cwd=REPO))
        print(f"  process: {name:<24} {seconds[name]:6.2f}s")
    ratio = seconds["explain orders KEY"] / seconds["show orders --limit 1"]
    print(f"  explain / show = {ratio:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warehouse", type=Path, help="measure this warehouse (default: build)")
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=10, help="keys per table, warm part")
    args = parser.parse_args()
    print(f"commit {commit()}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="explain-bench-") as scratch:
        warehouse = args.warehouse or build_warehouse(Path(scratch), args.events)
        print(f"warehouse {warehouse}: {mib(du(warehouse))}, bronze "
              f"{mib(du(warehouse / 'bronze_kafka_events'))}")
        warm(warehouse, args.keys)
        processes(warehouse, "o-00042")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
