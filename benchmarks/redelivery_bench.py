"""Benchmark: the pipeline against the physical limit, per-update cost, growth, and state size.

    .venv/bin/python benchmarks/redelivery_bench.py                      # every part, defaults
    .venv/bin/python benchmarks/redelivery_bench.py --events 200000 --history 20000 \\
        --increment 2000 --updates 4
    .venv/bin/python benchmarks/redelivery_bench.py --only raw,pipeline  # parts: small, raw,
                                                                         # pipeline, growth, state
    .venv/bin/python benchmarks/redelivery_bench.py --only state --watermark-delay "30 seconds"

Parts, all in one run (the commit is printed first, +dirty if src/ or pipelines/ differ):

- small: `exactly-once run --source file:F --warehouse W --quiet` as a whole process over a
  6,300-record stream (the demo's 5,000 events with redeliveries), wall clock, next to a process
  that only builds and stops the Spark session. Runs first, before this process starts a JVM.
- raw: the physical limit. One generated kcat file (`--events` events, 20% duplicates, 10% out
  of order, 1% malformed) appended to one Delta table by plain Structured Streaming (the
  pipeline's reader `read_kcat_file`, availableNow), in the session the pipeline then uses.
- pipeline: one update (`run_pipeline`) over the same file into a fresh warehouse: records/s,
  its ratio to raw append, seconds per flow (tables update in parallel threads, so the flows'
  seconds overlap). A tiny throwaway append warms the JVM first, so neither raw nor pipeline
  pays the first use of the JSON source and Delta writer; what only the pipeline uses (MERGE,
  RocksDB state) is not warmed, and its first use counts in the pipeline's time.
- growth: a warehouse built by one update over `--history` events, then one update of
  `--increment` new events of the same orders and players: each gold table's seconds in that
  increment update. Again with 10x the history (and 10x the entities).
- state: a fresh warehouse with `--history` events, then `--updates` increment updates; after
  each, streaming state per flow (rows and bytes), AUTO CDC key state, and the ledger's size.
  `--watermark-delay` overrides silver's dedup delay for this part only (default: conf/).

Ends with a summary in markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from _common import REPO, Feed, commit, du, mib, stream_records
from pyspark.sql import SparkSession

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe.progress import UpdateResult
from exactly_once.settings.pipeline import Settings, load_settings
from exactly_once.transforms.bronze import read_kcat_file

PARTS = ("small", "raw", "pipeline", "growth", "state")
GOLD = ("orders", "orders_history", "player_xp_ledger", "player_xp", "late_events")
LEDGER = "player_xp_ledger"
BARE_SESSION = ("import sys; from pathlib import Path; "
                "from exactly_once.local.engine.session import build_session; "
                "build_session(Path(sys.argv[1]), log_level='OFF').stop()")



@dataclass
class Summary:
    """Markdown printed at the end: one measure | value table, then the parts' own tables."""

    measures: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)

    def measure(self, name: str, value: str) -> None:
        self.measures.append(f"| {name} | {value} |")

    def render(self, head: str) -> str:
        measures = ["", "| measure | value |", "|---|---:|", *self.measures] \
            if self.measures else []
        return "\n".join(["", f"Summary ({head}):", *measures, *self.tables])


def settings_for(source: str, watermark_delay: str | None = None) -> Settings:
    overrides = {"exactly_once.source": source}
    if watermark_delay:
        for topic in load_settings("local").topics:
            overrides[f"exactly_once.topics.{topic}.watermark_delay"] = watermark_delay
    return load_settings("local", overrides=overrides)


def update(spark: SparkSession, source: str, warehouse: Path,
           watermark_delay: str | None = None) -> tuple[UpdateResult, float]:
    """One pipeline update and its wall clock (graph loading and the lock included)."""
    started = time.monotonic()
    result = run_pipeline(spark, settings_for(source, watermark_delay), warehouse)
    return result, time.monotonic() - started


def seconds_into(result: UpdateResult, target: str) -> float:
    """Seconds of the flows writing `target`. Tables update in parallel threads, so the flows'
    seconds overlap and add up to more than the update's wall clock."""
    return sum(f.seconds for f in result.flows if f.target == target)


def timed_process(args: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return seconds, done.stdout + done.stderr


# -- parts -------------------------------------------------------------------------------------
def small_update(work: Path, summary: Summary) -> None:
    stream = work / "small.jsonl"
    records = write_kcat_jsonl(stream, as_consumed(generate_stream(GeneratorConfig(
        events=5000, orders=500, players=200, seed=7))))  # `exactly-once generate`'s defaults
    cli = Path(sys.executable).parent / "exactly-once"
    run, out = timed_process([str(cli), "run", "--source", f"file:{stream}",
                              "--warehouse", str(work / "small_warehouse"), "--quiet"])
    inside = re.search(r"Update finished in ([\d.]+)s", out)
    bare, _ = timed_process([sys.executable, "-c", BARE_SESSION, str(work / "bare_warehouse")])
    print(f"\n[small] {records:,}-record update as a process: {run:.1f}s wall "
          f"(update itself {inside.group(1) if inside else '?'}s); bare session process "
          f"{bare:.1f}s; difference {run - bare:.1f}s (target: update <= 20 s)")
    summary.measure(f"{records:,}-record update, whole process", f"{run:.1f} s (target <= 20 s)")
    summary.measure("bare Spark session process", f"{bare:.1f} s")
    summary.measure("update minus bare session", f"{run - bare:.1f} s")


def raw_append(spark: SparkSession, stream: Path, table: Path) -> tuple[int, float]:
    """Plain Structured Streaming: kcat file -> one Delta table. Returns (rows, seconds)."""
    started = time.monotonic()
    read_kcat_file(spark, str(stream)).writeStream.format("delta") \
        .option("checkpointLocation", str(table.with_name(f"{table.name}_checkpoint"))) \
        .trigger(availableNow=True).start(str(table)).awaitTermination()
    seconds = time.monotonic() - started
    return spark.read.format("delta").load(str(table)).count(), seconds


def raw_and_pipeline(spark: SparkSession, events: int, parts: set[str], work: Path,
                     summary: Summary) -> None:
    warm = work / "warmup.jsonl"
    write_kcat_jsonl(warm, stream_records(1000, seed=99))
    rows, seconds = raw_append(spark, warm, work / "warmup_table")
    print(f"\nwarm-up: throwaway append of {rows:,} records ({seconds:.1f}s), not counted")
    stream = work / "stream.jsonl"
    records = write_kcat_jsonl(stream, stream_records(events))
    print(f"stream: {records:,} records from {events:,} events")
    raw_rate = None
    if "raw" in parts:
        rows, seconds = raw_append(spark, stream, work / "raw_table")
        raw_rate = rows / seconds
        print(f"\n[raw] append: {rows:,} rows in {seconds:.1f}s = {raw_rate:,.0f} records/s")
        summary.measure("raw append (physical limit)",
                        f"{raw_rate:,.0f} records/s ({rows:,} in {seconds:.1f} s)")
    if "pipeline" not in parts:
        return
    result, seconds = update(spark, f"file:{stream}", work / "pipeline_warehouse")
    rate = records / seconds
    bronze = result.flow_input("bronze_kafka_events")
    print(f"\n[pipeline] one update: {records:,} records in {seconds:.1f}s wall "
          f"(update {result.seconds:.1f}s) = {rate:,.0f} records/s"
          + ("" if bronze == records else f"  (bronze read {bronze:,}: not the file's count!)"))
    summary.measure("pipeline end to end",
                    f"{rate:,.0f} records/s ({records:,} in {seconds:.1f} s)")
    if raw_rate:
        print(f"  pipeline / raw append: {rate / raw_rate:.2f} (target >= 0.5)")
        summary.measure("pipeline / raw append", f"{rate / raw_rate:.2f} (target >= 0.5)")
    print(f"  {'flow':<30} {'target':<22} {'s':>7} {'batches':>7} {'in':>10} {'out':>10}")
    for f in sorted(result.flows, key=lambda f: -f.seconds):
        print(f"  {f.flow:<30} {f.target:<22} {f.seconds:7.1f} {f.batches:>7} "
              f"{f.input_rows:>10,} {f.output_rows:>10,}")
        summary.measure(f"flow {f.flow}", f"{f.seconds:.1f} s")


def growth(spark: SparkSession, history: int, increment: int, work: Path,
           summary: Summary) -> None:
    results: dict[int, UpdateResult] = {}
    for factor in (1, 10):
        feed = Feed.for_history(work / f"growth_{factor}x_feed", history * factor)
        warehouse = work / f"growth_{factor}x_warehouse"
        records = feed.append(history * factor, seed=1)
        _, seconds = update(spark, feed.source, warehouse)
        print(f"\n[growth {factor}x] history: {records:,} records in {seconds:.1f}s")
        records = feed.append(increment, seed=1001)  # the same increment at both scales
        results[factor], seconds = update(spark, feed.source, warehouse)
        print(f"[growth {factor}x] increment: {records:,} records in {seconds:.1f}s; rows: "
              + ", ".join(f"{t} {results[factor].table_rows.get(t, 0):,}" for t in GOLD))
    lines = ["", f"Gold flows in an update of {increment:,} events, history {history:,} (1x) "
             f"and {history * 10:,} (10x) events (target: 10x <= 1.2 x 1x):", "",
             "| table | rows 1x | rows 10x | batches 1x / 10x | 1x s | 10x s | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for table in GOLD:
        one, ten = (seconds_into(results[f], table) for f in (1, 10))
        batches = " / ".join(str(sum(f.batches for f in results[x].flows if f.target == table))
                             for x in (1, 10))
        lines.append(f"| {table} | {results[1].table_rows.get(table, 0):,} | "
                     f"{results[10].table_rows.get(table, 0):,} | {batches} | {one:.1f} | "
                     f"{ten:.1f} | {ten / one if one else float('nan'):.2f} |")
    one, ten = results[1].seconds, results[10].seconds
    lines.append(f"| whole update | | | | {one:.1f} | {ten:.1f} | {ten / one:.2f} |")
    print("\n".join(lines))
    summary.tables += lines


def state_rows(spark: SparkSession, checkpoint: Path) -> int | None:
    """Rows in a flow's streaming state now (Spark's state data source); None if unreadable."""
    try:
        return spark.read.format("statestore").load(str(checkpoint)).count()
    except Exception:  # noqa: BLE001 - a size we cannot read is reported, not fatal
        return None


def last_watermark(checkpoint: Path) -> str:
    """The watermark and start time of the flow's last batch (UTC), from its offset log (line 2
    of offsets/<batch> is Spark's batch metadata). A dedup entry goes once the watermark passes
    its ingested_at + delay; the watermark trails the newest ingested_at by the delay."""
    logs = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    if not logs:
        return "no batch"
    meta = json.loads(logs[-1].read_text().splitlines()[1])

    def utc(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S") if ms \
            else "none"
    return (f"watermark {utc(meta.get('batchWatermarkMs', 0))}, "
            f"batch at {utc(meta.get('batchTimestampMs', 0))}")


def delta_rows_bytes(spark: SparkSession, path: Path) -> tuple[int, int]:
    """Rows and bytes of the current snapshot (du also counts files older versions left)."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path.resolve()}`").first()
    return spark.read.format("delta").load(str(path)).count(), int(detail["sizeInBytes"])


def state_sizes(spark: SparkSession, history: int, increment: int, updates: int,
                watermark_delay: str | None, work: Path, summary: Summary) -> None:
    delays = {name: t.watermark_delay for name, t in settings_for("kafka", watermark_delay)
              .topics.items()}
    print(f"\n[state] silver dedup watermark delay (on ingested_at): {delays}"
          + (" (overridden by --watermark-delay)" if watermark_delay else " (conf/)"))
    feed = Feed.for_history(work / "state_feed", history)
    warehouse = work / "state_warehouse"
    pipeline_dir = warehouse / "_pipeline"
    lines = ["", f"State after each update (history {history:,} events, then {increment:,} "
             f"per update; silver watermark delay {', '.join(set(delays.values()))}):", "",
             "| update | at s | records | silver state rows | streaming state on disk | "
             "AUTO CDC key state | ledger rows | ledger snapshot / on disk |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    started = time.monotonic()
    for n in range(updates + 1):
        records = feed.append(history if n == 0 else increment, seed=1 if n == 0 else 2000 + n)
        result, seconds = update(spark, feed.source, warehouse, watermark_delay)
        at = time.monotonic() - started
        print(f"\nupdate {n} at +{at:.0f}s: {records:,} records in {seconds:.1f}s, "
              f"{result.total('duplicates_dropped'):,} duplicates dropped, "
              f"{result.total('late_rows_dropped'):,} past watermark")
        state_dirs = sorted(p for p in (pipeline_dir / "checkpoints").glob("*/state"))
        state_rows_total = 0
        for state in state_dirs:
            rows = state_rows(spark, state.parent)
            state_rows_total += rows or 0
            print(f"  streaming state {state.parent.name:<28} "
                  f"{'?' if rows is None else f'{rows:,}':>9} rows {mib(du(state)):>12}  "
                  f"({last_watermark(state.parent)})")
        cdc_rows = cdc_bytes = 0
        for table in sorted(p for p in (pipeline_dir / "auto_cdc").glob("*") if p.is_dir()):
            rows, size = delta_rows_bytes(spark, table)
            cdc_rows, cdc_bytes = cdc_rows + rows, cdc_bytes + size
            print(f"  AUTO CDC key state {table.name:<25} {rows:>9,} rows {mib(size):>12}")
        ledger_rows, ledger_bytes = delta_rows_bytes(spark, warehouse / LEDGER)
        on_disk = du(warehouse / LEDGER)
        print(f"  ledger {LEDGER}: {ledger_rows:,} rows, {mib(ledger_bytes)} snapshot, "
              f"{mib(on_disk)} on disk")
        lines.append(f"| {n} | {at:.0f} | {records:,} | {state_rows_total:,} | "
                     f"{mib(sum(du(s) for s in state_dirs))} | {cdc_rows:,} rows, "
                     f"{mib(cdc_bytes)} | {ledger_rows:,} | {mib(ledger_bytes)} / {mib(on_disk)} |")
    print("\n".join(lines))
    summary.tables += lines


# -- main --------------------------------------------------------------------------------------
def parts_list(text: str) -> set[str]:
    parts = {p.strip() for p in text.split(",") if p.strip()}
    if not parts or parts - set(PARTS):
        raise argparse.ArgumentTypeError(f"parts are {', '.join(PARTS)}; got {text!r}")
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="raw and pipeline")
    parser.add_argument("--history", type=int, default=20_000, help="growth (1x) and state")
    parser.add_argument("--increment", type=int, default=2_000, help="growth and state")
    parser.add_argument("--updates", type=int, default=4, help="increment updates for state")
    parser.add_argument("--watermark-delay", help='state only, e.g. "30 seconds"')
    parser.add_argument("--only", type=parts_list, default=set(PARTS),
                        help=f"comma-separated parts: {','.join(PARTS)}")
    args = parser.parse_args()
    head = (f"commit {commit()}, load average {os.getloadavg()[0]:.1f}, "
            f"parts {','.join(p for p in PARTS if p in args.only)}, "
            f"events {args.events:,}, history {args.history:,}, increment {args.increment:,}, "
            f"updates {args.updates}")
    print(head)
    summary = Summary()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        if "small" in args.only:  # first: its processes get the machine to themselves
            small_update(work, summary)
        steps: list[Callable[[SparkSession], None]] = []
        if args.only & {"raw", "pipeline"}:
            steps.append(lambda s: raw_and_pipeline(s, args.events, args.only, work, summary))
        if "growth" in args.only:
            steps.append(lambda s: growth(s, args.history, args.increment, work, summary))
        if "state" in args.only:
            steps.append(lambda s: state_sizes(s, args.history, args.increment, args.updates,
                                               args.watermark_delay, work, summary))
        if steps:
            spark = build_session(work / "spark-warehouse", app_name="bench", log_level="OFF")
            for step in steps:
                step(spark)
            spark.stop()
    print(summary.render(head))


if __name__ == "__main__":
    main()
