"""Benchmark: what one Delta write of a small AUTO CDC target costs, by kind of write, in one
warm session (issue 58: the AUTO CDC batches' writes are most of a warm update).

    .venv/bin/python benchmarks/delta_write_bench.py [--rows 300,3000,30000] [--reps 7]

Per table size, five tables of `rows` rows (a key, a number, a string) each take the same
batches of changes, 50 existing keys updated and 20 new ones, written as
- `merge`: Delta's MERGE (update matched, insert the rest), as SCD1's target merge;
- `replace`: an overwrite with `replaceWhere` on the batch's keys, as SCD2's target replace;
- `overwrite`: the whole table rewritten (its rows of other keys, then the batch's);
- `append`: the batch's rows appended (a blind append, as the AUTO CDC state tables');
- `append, row tracking`: the same into a table with `delta.enableRowTracking`, as
  `player_xp_ledger`'s target.
The kinds alternate (forwards, then backwards), the first round is a warm-up. Printed per size
and kind: the median seconds, the Spark jobs of one write (a job group per write, so the jobs
Delta starts from other threads count too), and the median against MERGE's.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="300,3000,30000")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()

    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from exactly_once.local.engine.session import build_session
    from exactly_once.local.storage.idempotent import REPLACE_WHERE_CHECK

    work = Path(tempfile.mkdtemp(prefix="delta-write-bench-"))
    spark = build_session(work / "spark")
    spark.conf.set(REPLACE_WHERE_CHECK, "false")  # as idempotent.replace writes
    tracker = spark.sparkContext.statusTracker()
    schema = "k long, v long, s string"

    def create(path: str, rows: int, row_tracking: bool) -> None:
        properties = "TBLPROPERTIES ('delta.enableRowTracking' = 'true')" if row_tracking else ""
        spark.sql(f"CREATE TABLE delta.`{path}` (k BIGINT, v BIGINT, s STRING) USING delta "
                  f"{properties}")
        spark.range(rows).select(F.col("id").alias("k"), (F.col("id") * 2).alias("v"),
                                 F.lit("x").alias("s")) \
            .write.format("delta").mode("append").save(path)

    def merge(path: str, batch: DataFrame) -> None:
        DeltaTable.forPath(spark, path).alias("t").merge(batch.alias("s"), "t.k = s.k") \
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    def replace(path: str, batch: DataFrame) -> None:
        keys = ",".join(str(row.k) for row in batch.select("k").collect())
        batch.write.format("delta").mode("overwrite").option("replaceWhere", f"k IN ({keys})") \
            .save(path)

    def overwrite(path: str, batch: DataFrame) -> None:
        spark.read.format("delta").load(path).join(batch.select("k"), "k", "left_anti") \
            .unionByName(batch).write.format("delta").mode("overwrite").save(path)

    def append(path: str, batch: DataFrame) -> None:
        batch.write.format("delta").mode("append").save(path)

    kinds: dict[str, tuple[Callable[[str, DataFrame], None], bool]] = {
        "merge": (merge, False), "replace": (replace, False), "overwrite": (overwrite, False),
        "append": (append, False), "append, row tracking": (append, True)}
    print(f"commit {commit()}, {args.reps - 1} writes of each kind after a warm-up round")
    rng = random.Random(1)
    for rows in (int(n) for n in args.rows.split(",")):
        paths = {kind: str(work / f"{kind.replace(', ', '-').replace(' ', '-')}-{rows}")
                 for kind in kinds}
        for kind, (_, row_tracking) in kinds.items():
            create(paths[kind], rows, row_tracking)
        seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
        jobs: dict[str, int] = {}
        for rep in range(args.reps):
            for kind in (list(kinds) if rep % 2 == 0 else list(reversed(kinds))):
                keys = rng.sample(range(rows), 50) + list(range(rows + 20 * rep,
                                                             rows + 20 * (rep + 1)))
                batch = spark.createDataFrame([(k, rng.randint(0, 9), "y") for k in keys],
                                              schema).localCheckpoint()
                group = f"bench-{rows}-{rep}-{kind}"
                spark.sparkContext.setJobGroup(group, group)
                began = time.monotonic()
                kinds[kind][0](paths[kind], batch)
                took = time.monotonic() - began
                spark.sparkContext.setJobGroup("", "")
                if rep:
                    seconds[kind].append(took)
                    jobs[kind] = len(tracker.getJobIdsForGroup(group))
        merged = statistics.median(seconds["merge"])
        print(f"{rows:,} rows:")
        for kind in kinds:
            median = statistics.median(seconds[kind])
            print(f"  {kind:<22} {median:6.3f} s  {jobs[kind]:3} jobs  "
                  f"{median / merged:5.2f} of MERGE's", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
