"""Benchmark: one 5-flow graph run by Apache Spark's `spark-pipelines run` (pyspark 4.2) and by
this runtime's `exactly-once run`, each as a whole process, alternated (issue 58's row).

    .venv/bin/python benchmarks/spark_pipelines_bench.py [--pairs 3] [--orders 1000] [--engine]

The graph is one both can run (`spark-pipelines` has no AUTO CDC into Delta and no
expectations): five materialized views in five files, `from pyspark import pipelines as dp`,
over a JSON file of orders (`bench.orders`, a pipeline parameter): the file as read, its valid
rows, two aggregates of those, the top ten of one. The project folder holds both specs, a
`spark-pipeline.yml` and a `databricks.yml` naming the same files. Each run gets a new storage
folder (`spark-pipelines`' in-memory catalog forgets its tables between runs) and a new
warehouse, so every run computes every table.

Sides, each a new process per run, alternated ABBA:
- A `exactly-once run --bundle DIR` (no resident engine: `EXACTLY_ONCE_ENGINE=off`);
- B `spark-pipelines run --spec DIR/spark-pipeline.yml` (it starts its own Spark Connect server).
With `--engine`, a third side C: `exactly-once run` sent to a resident engine started once
before the pairs (its start printed apart): what a developer's loop pays once an engine runs.

Printed: each run's seconds, the medians, A / B (issue 58's target: <= 0.3) and C / B, and
whether both wrote the same top ten (read from the Parquet files of each side's table).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit

BIN = Path(sys.executable).parent
ORDERS_SCHEMA = "order_id STRING, player_id STRING, status STRING, amount DOUBLE, ts TIMESTAMP"

FILES = {
    "raw_orders.py": f'''
@dp.materialized_view(comment="The orders file as it is.")
def raw_orders() -> DataFrame:
    return spark.read.schema("{ORDERS_SCHEMA}").json(spark.conf.get("bench.orders"))
''',
    "valid_orders.py": '''
@dp.materialized_view
def valid_orders() -> DataFrame:
    return (spark.read.table("raw_orders")
            .where(F.col("order_id").isNotNull() & (F.col("amount") >= 0))
            .withColumn("day", F.to_date("ts")))
''',
    "player_totals.py": '''
@dp.materialized_view
def player_totals() -> DataFrame:
    return spark.read.table("valid_orders").groupBy("player_id").agg(
        F.count("*").alias("orders"), F.sum("amount").alias("amount"))
''',
    "daily_status.py": '''
@dp.materialized_view
def daily_status() -> DataFrame:
    return spark.read.table("valid_orders").groupBy("day", "status").count()
''',
    "top_players.py": '''
@dp.materialized_view
def top_players() -> DataFrame:
    return spark.read.table("player_totals").orderBy(F.desc("amount"), "player_id").limit(10)
''',
}
HEADER = ("from pyspark import pipelines as dp\nfrom pyspark.sql import DataFrame\n"
          "from pyspark.sql import functions as F\n\n")


def write_project(project: Path, orders: int) -> Path:
    """The five files, both specs and the orders file (some invalid: no id, a negative
    amount); the orders file's path."""
    (project / "transformations").mkdir(parents=True)
    for name, body in FILES.items():
        (project / "transformations" / name).write_text(HEADER + body.lstrip("\n"))
    data = project / "orders.jsonl"
    rng = random.Random(1)
    with data.open("w") as out:
        for i in range(orders):
            out.write(json.dumps({
                "order_id": None if i % 97 == 0 else f"o{i}",
                "player_id": f"p{rng.randrange(max(orders // 20, 1))}",
                "status": rng.choice(["created", "paid", "shipped"]),
                "amount": round(rng.uniform(-5, 100), 2),
                "ts": f"2026-11-{rng.randrange(1, 28):02d}T10:00:00Z"}) + "\n")
    (project / "spark-pipeline.yml").write_text(
        f"name: g5\nstorage: file://{project}/storage\nconfiguration:\n"
        f"  bench.orders: {data}\nlibraries:\n  - glob:\n      include: transformations/**\n")
    (project / "databricks.yml").write_text(
        "bundle:\n  name: g5\nresources:\n  pipelines:\n    g5:\n      name: g5\n"
        f"      configuration:\n        bench.orders: {data}\n"
        "      libraries:\n        - glob:\n            include: transformations/**\n")
    return data


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds `args` took as a process; exits with its output if it failed."""
    started = time.monotonic()
    done = subprocess.run(args, cwd=cwd, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=1800)
    seconds = time.monotonic() - started
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                 f"{done.stderr[-3000:]}")
    return seconds


def top_ten(table: Path) -> list[tuple]:
    """The rows of the Parquet files under `table` (a Delta table written once has no file
    removed; `_delta_log` is skipped as pyarrow skips `_` folders), sorted."""
    import pyarrow.dataset as ds

    rows = ds.dataset(str(table), format="parquet").to_table().to_pylist()
    return sorted((r["player_id"], r["orders"], round(r["amount"], 6)) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--engine", action="store_true",
                        help="also runs sent to a resident engine started once (side C)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="spark-pipelines-bench-"))
    project = work / "project"
    write_project(project, args.orders)
    # Both CLIs find Spark through the venv's pyspark; spark-pipelines' script needs it on PATH.
    env = {"PATH": f"{BIN}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO / "src"), "EXACTLY_ONCE_HOME": str(work / "home")}
    ours_env = {**env, "EXACTLY_ONCE_ENGINE": "off"}
    print(f"commit {commit()}, {args.orders} orders, load {os.getloadavg()[0]:.1f}", flush=True)

    runs = 0

    def ours(env_: dict[str, str]) -> tuple[float, Path]:
        nonlocal runs
        runs += 1
        warehouse = work / f"warehouse-{runs}"
        return timed([str(BIN / "exactly-once"), "run", "--quiet", "--bundle", str(project),
                      "--warehouse", str(warehouse)], project, env_), warehouse / "top_players"

    def theirs() -> tuple[float, Path]:
        nonlocal runs
        runs += 1
        run_dir = work / f"spark-pipelines-{runs}"  # its spark-warehouse/ and storage
        run_dir.mkdir()
        shutil.rmtree(project / "storage", ignore_errors=True)
        return timed([str(BIN / "spark-pipelines"), "run", "--spec",
                      str(project / "spark-pipeline.yml")], run_dir, env), \
            run_dir / "spark-warehouse" / "top_players"

    seconds: dict[str, list[float]] = {"A": [], "B": [], "C": []}
    tables: dict[str, Path] = {}
    engine_env = {**env, "EXACTLY_ONCE_ENGINE": "on"}
    if args.engine:
        started = timed([str(BIN / "exactly-once"), "engine", "start"], project, engine_env)
        print(f"resident engine start {started:.1f}s", flush=True)
    try:
        sides = {"A": lambda: ours(ours_env), "B": theirs, "C": lambda: ours(engine_env)}
        for pair in range(args.pairs):
            order = ["A", "B"] if pair % 2 == 0 else ["B", "A"]
            if args.engine:
                order.append("C")
            for side in order:
                took, tables[side] = sides[side]()
                seconds[side].append(took)
                print(f"  pair {pair + 1} {side} {took:.1f}s  load {os.getloadavg()[0]:.1f}",
                      flush=True)
    finally:
        if args.engine:
            timed([str(BIN / "exactly-once"), "engine", "stop"], project, engine_env)

    medians = {side: statistics.median(s) for side, s in seconds.items() if s}
    print(f"A exactly-once run (process): {', '.join(f'{s:.1f}' for s in seconds['A'])} s, "
          f"median {medians['A']:.1f}")
    print(f"B spark-pipelines run:        {', '.join(f'{s:.1f}' for s in seconds['B'])} s, "
          f"median {medians['B']:.1f}")
    if args.engine:
        print(f"C exactly-once run via the resident engine: "
              f"{', '.join(f'{s:.1f}' for s in seconds['C'])} s, median {medians['C']:.1f}")
    print(f"A / B {medians['A'] / medians['B']:.2f} (target <= 0.3)"
          + (f", C / B {medians['C'] / medians['B']:.2f}" if args.engine else ""))
    same = top_ten(tables["A"]) == top_ten(tables["B"])
    print(f"the same top ten on both sides: {'yes' if same else 'NO'}")
    shutil.rmtree(work, ignore_errors=True)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
