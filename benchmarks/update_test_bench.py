"""Benchmark: what a change to a test's reads of tables saves a test of a bundle's pipeline,
A (the change) against B (without it), in one session.

    .venv/bin/python benchmarks/update_test_bench.py --change catalog [--pairs 10]
    .venv/bin/python benchmarks/update_test_bench.py --change assert [--pairs 10]

`--change catalog`: a dataset's batch read of a table of the local catalog (a fixture, a given
table) made as the Parquet files the table's log names (`LocalCatalog.read` through
`snapshot_files.read_latest`), against Delta's reader; the test asserts on `snapshot(name)`.
`--change assert`: `assert_table` on `table(name)` (Delta's reader) reading the whole table as
its log's files (testing/compare.py), against collecting Delta's reader.

One warm session, as a pytest session of the plugin runs its tests. Each round is an "update
test" of tests/bundles/tested_taxis, as `pytest_plugin_bench.py` makes it: a new harness (its
own warehouse and catalog), two given rows of `samples.nyctaxi.trips` (a new Delta table of the
catalog, which `trips` reads in batch), one update of the pipeline, and `assert_table` on
`fares_by_zip`. The two sides alternate (ABBA) after a warm-up of each (`_common.ab_pairs`);
printed: each round's wall and driver JVM CPU seconds, then the means and A / B.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import REPO, ab_pairs, commit, driver_pid, jvm_cpu

BUNDLE = REPO / "tests" / "bundles" / "tested_taxis"
TRIPS = [{"pickup_zip": 10103, "trip_distance": 1.0, "fare_amount": 8.0},
         {"pickup_zip": 10103, "trip_distance": 2.0, "fare_amount": 4.5}]
FARES = [{"pickup_zip": 10103, "trips": 2, "total_fare": 12.5}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--change", choices=("catalog", "assert"), required=True)
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()

    from pyspark.sql import DataFrame, SparkSession

    from exactly_once.local.catalog import catalog
    from exactly_once.local.engine.session import build_session
    from exactly_once.testing import assert_table, compare
    from exactly_once.testing.harness import PipelineHarness
    from exactly_once.workspace.pipelines import local_pipeline, open_bundle

    def by_delta(spark: SparkSession, location: str) -> DataFrame:
        return spark.read.format("delta").load(location)

    def as_given(df: DataFrame) -> DataFrame:
        return df

    as_files, latest_files = catalog.read_latest, compare._latest_files
    work = Path(tempfile.mkdtemp(prefix="update-test-bench-"))
    spark = build_session(work / "spark")
    pid = driver_pid(spark)
    bundle = open_bundle(BUNDLE)
    print(f"commit {commit()}; --change {args.change}: A with it, B without")
    tests = 0

    def update_test(side: str) -> tuple[float, float]:
        nonlocal tests
        tests += 1
        if args.change == "catalog":
            catalog.read_latest = as_files if side == "A" else by_delta  # type: ignore[assignment]
        else:
            compare._latest_files = latest_files if side == "A" else as_given
        cpu, began = jvm_cpu(pid), time.perf_counter()
        harness = PipelineHarness(spark, local_pipeline(bundle), work / f"test-{tests}")
        harness.given("samples.nyctaxi.trips", TRIPS)
        harness.update()
        assert_table(harness.snapshot("fares_by_zip") if args.change == "catalog"
                     else harness.table("fares_by_zip"), FARES)
        return time.perf_counter() - began, jvm_cpu(pid) - cpu

    ab_pairs(update_test, args.pairs)


if __name__ == "__main__":
    main()
