"""SIGKILL a real run at points drawn across a whole update; one more run ends with the tables of
an uninterrupted run (Spark's StreamTest stops and restarts a query at random points; Kafka's
transactions system test bounces the clients and requires output = input).

The points come from the update itself: `crash_points.write_order` lists, in the order an
uninterrupted update wrote them, its Delta commits and the first directory of each table's
creation, its checkpoints' metadata, offsets and commits, its state-store files, its event log and
its lock. A trial:

1. prepares a warehouse as the update had it when it began the table the point belongs to
   (`crash_points.prepare`), so the run that gets killed is the smallest update that reaches
   the point: `exactly-once run --refresh <table>` (the lock and the event log: the last table);
2. runs that command as a process of its own (the CLI and its Spark JVM, in a process group)
   and SIGKILLs the group the moment the point's file appears;
3. for the restart trial, runs it again and kills it inside that restarted run;
4. runs one normal update (in this session's Spark: the process that gets killed is the one that
   must be real) and requires the tables, and the row counts the update reports, of the
   uninterrupted run (each table read as the Parquet files its log names, which one test
   checks against Delta's reader on the uninterrupted run's tables).

CI runs `CI_POINTS`: the first creation of each kind of table (append, AUTO CDC target and its
state, materialized view, event log), streaming state, the lock, and an AUTO CDC batch killed
between its target and state commits, then again inside the restarted run; and that last point
once more with the killed run on the shared standalone cluster (its driver killed while the
cluster's executors run its tasks). `CRASH_SWEEP=all` runs every recorded point (about 90, a
trial each: an hour or more).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from crash_points import (
    LOCK,
    TABLES,
    contents,
    first_points,
    kill_at,
    owner,
    prepare,
    write_order,
    write_tiny_dump,
)

from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.graph.loader import load_graph
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.paths import PIPELINES_DIR, pipeline_files
from exactly_once.settings.pipeline import load_settings

SILVER_STATE = "_pipeline/checkpoints/silver_orders/state"  # its dedup state (RocksDB)


def first(pattern: Callable[[str], bool]) -> Callable[[list[str]], str]:
    return lambda order: next(p for p in order if pattern(p))


CI_POINTS: dict[str, Callable[[list[str]], str]] = {  # name -> the point in the write order
    "lock taken": first(lambda p: p == LOCK),
    "append table created": first(lambda p: p == "bronze_kafka_events/_delta_log/_staged_commits"),
    # RocksDB's commit file: a changelog (changelog checkpointing, engine/session.py), or a
    # snapshot's zip without it.
    "streaming state committed": first(
        lambda p: p.startswith(f"{SILVER_STATE}/") and p.endswith((".changelog", ".zip"))),
    "AUTO CDC target created": first(lambda p: p == "orders/_delta_log/_staged_commits"),
    "AUTO CDC state created": first(
        lambda p: p == "_pipeline/auto_cdc/orders/_delta_log/_staged_commits"),
    "AUTO CDC target committed, state not": first(
        lambda p: p == "orders/_delta_log/00000000000000000001.json"),
    "materialized view created": first(lambda p: p == "player_xp/_delta_log/_staged_commits"),
    "event log created": first(lambda p: p == "event_log/_delta_log/_staged_commits"),
}
RESTARTED = {"AUTO CDC target committed, state not"}  # trials killed again inside the restart


class Sweep:
    """What every trial shares: the dump, the uninterrupted run and the order it wrote."""

    def __init__(self, spark, root: Path):
        self.spark, self.root = spark, root
        self.dump = write_tiny_dump(root / "stream.jsonl")
        self.settings = load_settings("local", overrides={
            "exactly_once.source": f"file:{self.dump}"})
        self.reference = Warehouse(root / "reference")
        self.reference_rows = run_pipeline(spark, self.settings, self.reference.root).table_rows
        self.reference_tables = contents(spark, self.reference.root)
        self.order = write_order(self.reference.root)
        self.graph: PipelineGraph = load_graph(spark, pipeline_files(PIPELINES_DIR))
        # The lock and the event log belong to every update: the smallest one updates the
        # table the update began last.
        began = first_points(self.graph, self.reference, self.order)
        self.last_table = max(began, key=began.__getitem__)

    def trial(self, name: str, point: str, restart: bool = False,
              master: str | None = None) -> None:
        """Kill a run at `point` (and, with `restart`, the next run at the next point it writes
        that the first did not), then one more run: the tables of the uninterrupted run.
        `master`: the killed run's (a standalone cluster's), else the default local[2]."""
        table = owner(self.graph, self.reference, point) or self.last_table
        warehouse = Warehouse(self.root / name.replace(" ", "-").replace(",", ""))
        prepare(self.graph, self.reference, self.order, table, warehouse)
        args = ["run", "--quiet", "--source", f"file:{self.dump}",
                "--warehouse", str(warehouse.root), "--refresh", table,
                *(["--master", master] if master else [])]
        self.kill_at(args, warehouse.root / point, name)
        if restart:
            later = self.order[self.order.index(point) + 1:]
            after = next(p for p in later if owner(self.graph, warehouse, p) == table
                         and not (warehouse.root / p).exists())
            self.kill_at(args, warehouse.root / after, f"{name}, restarted")
        result = run_pipeline(self.spark, self.settings, warehouse.root)
        assert contents(self.spark, warehouse.root) == self.reference_tables, name
        assert result.table_rows == self.reference_rows, name

    def kill_at(self, args: list[str], marker: Path, name: str) -> None:
        kill_at(args, marker, name, self.root)


@pytest.fixture(scope="module")
def sweep(spark, tmp_path_factory) -> Sweep:
    return Sweep(spark, tmp_path_factory.mktemp("crash-sweep"))


def test_the_write_order_reaches_every_kind_of_table(sweep):
    """The recorded order holds every CI point, in the order an update reaches them."""
    points = [pick(sweep.order) for pick in CI_POINTS.values()]
    assert len(set(points)) == len(points) >= 8
    assert sweep.order[0] == LOCK
    # The event log is written when every table is done.
    event_log = [i for i, p in enumerate(sweep.order) if p.startswith("event_log/")]
    assert event_log and min(event_log) > max(
        i for i, p in enumerate(sweep.order[1:], 1) if not p.startswith("event_log/"))
    for table in TABLES:  # every table's creation and commits, its checkpoints' files
        assert f"{table}/_delta_log/_staged_commits" in sweep.order
        assert f"{table}/_delta_log/00000000000000000000.json" in sweep.order, table
    for flow in ("bronze_kafka_events", "orders", "player_xp_ledger"):
        assert {f"_pipeline/checkpoints/{flow}/{name}" for name in (
            "metadata", "offsets/0", "commits/0")} <= set(sweep.order)


def test_the_tables_read_as_their_files_are_what_delta_reads(sweep):
    """The trials read each table as the Parquet files its log names (`contents`, a tenth of
    Delta's reader's cost); on the uninterrupted run's tables, every kind the pipeline writes,
    that gives Delta's rows."""
    assert contents(sweep.spark, sweep.reference.root, by_delta=True) == sweep.reference_tables


@pytest.mark.parametrize("name", list(CI_POINTS))
def test_a_run_killed_at_a_point_of_the_update_then_run_again(sweep, name):
    sweep.trial(name, CI_POINTS[name](sweep.order), restart=name in RESTARTED)


def test_a_run_on_the_cluster_killed_at_a_point_then_run_again(sweep, spark_cluster):
    """The same on a standalone cluster: the driver killed between an AUTO CDC batch's two
    commits while executors of the cluster run its tasks; the next update ends the same."""
    name = "AUTO CDC target committed, state not"
    sweep.trial(f"{name} on the cluster", CI_POINTS[name](sweep.order), master=spark_cluster.url)


@pytest.mark.skipif(os.environ.get("CRASH_SWEEP") != "all",
                    reason="every recorded point (an hour or more): CRASH_SWEEP=all")
def test_a_run_killed_at_every_recorded_point(sweep):
    failed = []
    for index, point in enumerate(sweep.order):
        try:
            sweep.trial(f"point {index}", point)
        except (pytest.fail.Exception, Exception) as err:  # noqa: BLE001 - report them all
            failed.append(f"{point}: {str(err).splitlines()[0] if str(err) else err!r}")
    assert not failed, "\n".join(failed)
