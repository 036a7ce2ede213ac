"""Benchmark: what a test of the pytest plugin costs (issue "Test your pipeline with pytest").

    .venv/bin/python benchmarks/pytest_plugin_bench.py [--tests 6] [--parts session,process]

Parts, on tests/bundles/tested_taxis (four datasets: a @dp.table over a fixture table with an
expectation, a SQL materialized view over it, an Auto Loader table over a volume, a
materialized view over that):

- session: one process and one session, as a pytest session runs its tests. Each "update test"
  is a new harness (its own warehouse and catalog), two given rows, one update of the whole
  pipeline, a table read and `assert_table`; each "unit test" is `pipeline.dataset(...)` of the
  SQL view on two given rows. Beside each, in the same session, the baseline: the same rows
  through plain Spark (a DataFrame of them, the aggregate, collected), what a test without the
  pipeline would at least cost. Printed: the first test, then the median of the others
  (targets: an update test about 1 s, <= 2 s; a unit test well under that), and each median's
  ratio to the baseline's.
- process: `pytest` of the bundle's own tests as a new process, then with a resident engine
  running (`exactly-once engine start`): the second invocation pays no JVM start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit

BUNDLE = REPO / "tests" / "bundles" / "tested_taxis"
TRIPS = [{"pickup_zip": 10103, "trip_distance": 1.0, "fare_amount": 8.0},
         {"pickup_zip": 10103, "trip_distance": 2.0, "fare_amount": 4.5}]


def session_part(tests: int) -> None:
    from exactly_once.local.engine.session import build_session
    from exactly_once.testing import assert_table
    from exactly_once.testing.harness import PipelineHarness
    from exactly_once.workspace.pipelines import local_pipeline, open_bundle

    scratch = Path(tempfile.mkdtemp(prefix="plugin-bench-"))
    started = time.perf_counter()
    spark = build_session(scratch / "spark")
    print(f"session start: {time.perf_counter() - started:.2f} s")
    bundle = open_bundle(BUNDLE)
    update, unit, raw = [], [], []
    for n in range(tests):
        began = time.perf_counter()
        harness = PipelineHarness(spark, local_pipeline(bundle), scratch / f"update-{n}")
        harness.given("samples.nyctaxi.trips", TRIPS)
        harness.update()
        assert_table(harness.table("fares_by_zip"),
                     [{"pickup_zip": 10103, "trips": 2, "total_fare": 12.5}])
        update.append(time.perf_counter() - began)

        began = time.perf_counter()
        harness = PipelineHarness(spark, local_pipeline(bundle), scratch / f"unit-{n}")
        rows = harness.dataset("fares_by_zip", given={"trips": [
            {"pickup_zip": 10103, "trip_distance": 1.0, "fare": 8.0},
            {"pickup_zip": 10103, "trip_distance": 2.0, "fare": 4.5}]})
        assert_table(rows, [{"pickup_zip": 10103, "trips": 2, "total_fare": 12.5}])
        unit.append(time.perf_counter() - began)

        began = time.perf_counter()
        df = spark.createDataFrame(TRIPS).where("trip_distance > 0")
        got = df.groupBy("pickup_zip").agg({"fare_amount": "sum"}).collect()
        assert got[0][1] == 12.5
        raw.append(time.perf_counter() - began)
    shutil.rmtree(scratch, ignore_errors=True)
    for name, times in (("update test", update), ("unit test", unit), ("plain Spark", raw)):
        rest = statistics.median(times[1:]) if len(times) > 1 else times[0]
        print(f"{name:<12} first {times[0]:6.2f} s, then median {rest:6.2f} s "
              f"(min {min(times[1:] or times):.2f}, max {max(times[1:] or times):.2f}); "
              f"/ plain Spark {rest / statistics.median(raw[1:] or raw):6.1f}x")


def process_part() -> None:
    folder = Path(tempfile.mkdtemp(prefix="plugin-bench-bundle-")) / "tested_taxis"
    shutil.copytree(BUNDLE, folder)
    cli = [sys.executable, "-m", "exactly_once.cli"]
    home = folder / ".engine-home"
    env = {**os.environ, "EXACTLY_ONCE_HOME": str(home), "EXACTLY_ONCE_ENGINE": ""}
    env.pop("PYTEST_XDIST_WORKER", None)

    def pytest_run(label: str) -> None:
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                              cwd=folder, env=env, capture_output=True, text=True)
        tail = (done.stdout.strip().splitlines() or ["?"])[-1]
        print(f"{label:<34} {time.perf_counter() - began:6.2f} s  ({tail})")

    pytest_run("pytest, a new process")
    began = time.perf_counter()
    subprocess.run([*cli, "engine", "start"], cwd=folder, env=env, check=True,
                   capture_output=True)
    print(f"{'engine start':<34} {time.perf_counter() - began:6.2f} s")
    try:
        pytest_run("pytest, in the engine (1st)")
        pytest_run("pytest, in the engine (2nd)")
    finally:
        subprocess.run([*cli, "engine", "stop"], cwd=folder, env=env, capture_output=True)
    shutil.rmtree(folder.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=6)
    parser.add_argument("--parts", default="session,process")
    args = parser.parse_args()
    print(f"commit {commit()}, {os.cpu_count()} cores")
    parts = args.parts.split(",")
    if "session" in parts:
        session_part(args.tests)
    if "process" in parts:
        process_part()


if __name__ == "__main__":
    main()
