"""Benchmark: the pipeline end to end on a stream with redeliveries, against a naive baseline.

    .venv/bin/python benchmarks/redelivery_bench.py [--events 1000000] [--merge-rows 20000]

`--events 0` skips the pipeline and measures only the MERGE growth.

Generates N events (20% duplicates, 10% out of order, 1% malformed) as a kcat file, runs one
pipeline update from it into a fresh warehouse and prints: events/s end to end, seconds per flow,
streaming state on disk, the processed-ID ledger's rows and bytes. Then the naive baseline on
the same bronze table: streaming `dropDuplicates(event_id)` without a watermark plus an unguarded
MERGE (last delivery wins), with its time, state size, and how many orders it gets wrong. Last,
the cost of one AUTO CDC micro-batch MERGE as the target grows from 1x to 10x. Prints the commit.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.config import load_settings
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
from exactly_once.local.auto_cdc import apply_scd1_batch, state_schema, target_schema
from exactly_once.local.auto_cdc_spec import AutoCdcSpec
from exactly_once.local.pipeline import run_pipeline
from exactly_once.local.session import build_session
from exactly_once.transforms.silver import parse_events, valid_events


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def pipeline_run(spark: SparkSession, events: int, work: Path) -> None:
    stream = work / "stream.jsonl"
    started = time.monotonic()
    records = as_consumed(generate_stream(GeneratorConfig(
        events=events, orders=max(events // 10, 1), players=max(events // 50, 1),
        duplicate_rate=0.2, late_redelivery_rate=0.0, out_of_order_rate=0.1,
        malformed_rate=0.01, seed=1)))
    write_kcat_jsonl(stream, records)
    print(f"generated {len(records):,} records ({events:,} events) in "
          f"{time.monotonic() - started:.0f}s")
    warehouse = work / "warehouse"
    settings = load_settings("local", overrides={"exactly_once.source": f"file:{stream}"})
    result = run_pipeline(spark, settings, warehouse)
    print(f"\npipeline: {len(records):,} records in {result.seconds:.1f}s = "
          f"{len(records) / result.seconds:,.0f} records/s, "
          f"{events / result.seconds:,.0f} events/s end to end")
    for flow in result.flows:
        print(f"  {flow.flow:<28} {flow.seconds:7.1f}s  {flow.input_rows:>10,} in "
              f"{flow.output_rows:>10,} out")
    checkpoints = warehouse / "_pipeline" / "checkpoints"
    state = sum(du(p / "state") for p in checkpoints.iterdir())
    print(f"  streaming state on disk (all flows): {mib(state)}")
    ledger = warehouse / "player_xp_ledger"
    rows = spark.read.format("delta").load(str(ledger)).count()
    print(f"  processed-ID ledger: {rows:,} rows, {mib(du(ledger))}")
    print(f"  duplicates dropped {result.total('duplicates_dropped'):,}, "
          f"stale changes ignored {result.total('cdc_stale'):,}")
    naive_baseline(spark, warehouse, work)


def naive_baseline(spark: SparkSession, warehouse: Path, work: Path) -> None:
    """dropDuplicates without a watermark (state kept forever) + MERGE without a sequence guard."""
    orders = load_settings("local").topic("orders")
    target = work / "naive_orders"
    bronze = spark.readStream.format("delta").load(str(warehouse / "bronze_kafka_events"))
    events = valid_events(parse_events(bronze, orders), orders).dropDuplicates(["event_id"])
    spark.createDataFrame([], events.schema).write.format("delta").save(str(target))

    def last_delivery_wins(batch: DataFrame, _: int) -> None:
        latest = batch.dropDuplicates(["order_id"])  # no ordering: whichever row survives
        DeltaTable.forPath(spark, str(target)).alias("t").merge(
            latest.alias("s"), "t.order_id = s.order_id").whenMatchedUpdateAll() \
            .whenNotMatchedInsertAll().execute()

    started = time.monotonic()
    events.writeStream.foreachBatch(last_delivery_wins) \
        .option("checkpointLocation", str(work / "naive_ckpt")) \
        .trigger(availableNow=True).start().awaitTermination()
    seconds = time.monotonic() - started
    guarded = spark.read.format("delta").load(str(warehouse / "orders")).select(
        "order_id", F.col("sequence").alias("guarded"))
    naive = spark.read.format("delta").load(str(target)).select(
        "order_id", F.col("sequence").alias("naive"))
    wrong = naive.join(guarded, "order_id", "full_outer").where(
        ~F.col("naive").eqNullSafe(F.col("guarded"))).count()
    print(f"\nnaive baseline: {seconds:.1f}s, state {mib(du(work / 'naive_ckpt' / 'state'))} "
          f"(grows with every event_id ever seen), orders wrong vs guarded: {wrong:,}")


def merge_growth(spark: SparkSession, batch_rows: int, work: Path) -> None:
    """Seconds for one AUTO CDC micro-batch MERGE into a target of 1x and 10x the batch."""
    spec = AutoCdcSpec(name="bench", target="t", source="s", keys=("id",),
                       sequence_by=F.col("seq"))
    print()
    for factor in (1, 10):
        root = work / f"merge_{factor}x"
        target, state = str(root / "target"), str(root / "state")
        existing = spark.range(batch_rows * factor).select(
            F.col("id").cast("string").alias("id"), F.lit(1).cast("bigint").alias("seq"),
            F.lit("v").alias("value"))
        spark.createDataFrame([], target_schema(spec, existing)).write.format("delta").save(target)
        spark.createDataFrame([], state_schema(spec, existing)).write.format("delta").save(state)
        apply_scd1_batch(spark, existing, 0, spec, target, state,
                         query_id="bench")  # load the target, untimed
        batch = spark.range(batch_rows).select(  # half updates of existing keys, half new keys
            (F.col("id") * 2).cast("string").alias("id"), F.lit(2).cast("bigint").alias("seq"),
            F.lit("w").alias("value"))
        started = time.monotonic()
        apply_scd1_batch(spark, batch, 1, spec, target, state, query_id="bench")
        print(f"AUTO CDC MERGE of {batch_rows:,} changes into {batch_rows * factor:,} rows "
              f"({factor}x): {time.monotonic() - started:.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--merge-rows", type=int, default=20_000)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"commit {commit}, {args.events:,} events")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        spark = build_session(work / "warehouse", app_name="bench", log_level="OFF")
        if args.events:  # --events 0: only the MERGE growth
            pipeline_run(spark, args.events, work)
        merge_growth(spark, args.merge_rows, work)
        spark.stop()


if __name__ == "__main__":
    main()
