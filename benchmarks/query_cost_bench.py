"""Benchmark: what a streaming query costs over the write it makes (issue 58's road 1, fewer
streaming queries per update, is worth at most this much a query).

    .venv/bin/python benchmarks/query_cost_bench.py [--rounds 30]

One warm session. Each round appends 10 rows to a Delta table (the baseline: a plain batch
append, what a fused query would still do for each table), then reads them with an availableNow
query, as an update's flows do:
- `foreachBatch` whose batch is a plain Delta append (how the runtime's append flows write:
  flows.py, idempotent.py), and the same query again with nothing new;
- Delta's own streaming sink (`writeStream.format("delta")`), and again with nothing new.
Printed: the medians of the driver JVM's CPU and the wall of each, after 10 warm-up rounds, and
each against the plain append of the same round.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import commit, driver_pid, jvm_cpu, suite_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    work = Path(tempfile.mkdtemp(prefix="query-cost-bench-"))
    spark = suite_session(work)
    pid = driver_pid(spark)
    source = str(work / "source")

    def rows(round_: int) -> DataFrame:
        return spark.range(round_ * 10, round_ * 10 + 10).select(
            "id", F.lit("x").alias("value"), F.current_timestamp().alias("at"))

    def measured(run: Callable[[], None]) -> tuple[float, float]:
        cpu, began = jvm_cpu(pid), time.monotonic()
        run()
        return time.monotonic() - began, jvm_cpu(pid) - cpu

    def append_to_source(round_: int) -> Callable[[], None]:
        return lambda: rows(round_).write.format("delta").mode("append").save(source)

    def foreach_batch() -> None:
        def append(batch: DataFrame, _: int) -> None:
            batch.write.format("delta").mode("append").save(str(work / "appended"))
        (spark.readStream.format("delta").load(source).writeStream.foreachBatch(append)
         .option("checkpointLocation", str(work / "checkpoint-foreach-batch"))
         .trigger(availableNow=True).start().awaitTermination())

    def delta_sink() -> None:
        (spark.readStream.format("delta").load(source).writeStream.format("delta")
         .option("checkpointLocation", str(work / "checkpoint-delta-sink"))
         .trigger(availableNow=True).start(str(work / "sunk")).awaitTermination())

    # In this order each round: the append gives both queries 10 new rows.
    ways = {"plain append (baseline)": None, "foreachBatch query": foreach_batch,
            "foreachBatch, no new rows": foreach_batch, "Delta sink query": delta_sink,
            "Delta sink, no new rows": delta_sink}
    found: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    append_to_source(0)()
    for round_ in range(1, 10 + args.rounds + 1):
        for way, run in ways.items():
            taken = measured(run or append_to_source(round_))
            if round_ > 10:  # the first ten warm the session
                found[way].append(taken)
    spark.stop()
    shutil.rmtree(work)
    base_wall, base_cpu = (statistics.median(r[i] for r in found["plain append (baseline)"])
                           for i in (0, 1))
    print(f"medians of {args.rounds} rounds, 10 rows each; / the plain append of the same rounds")
    for way, taken in found.items():
        wall, cpu = (statistics.median(r[i] for r in taken) for i in (0, 1))
        print(f"  {way:25s} JVM CPU {cpu:6.3f} s ({cpu / base_cpu:5.2f}x)   "
              f"wall {wall:6.3f} s ({wall / base_wall:5.2f}x)")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
