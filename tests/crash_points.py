"""What the crash tests share: a tiny dump, the tables an interrupted run must end with, and
where on disk each table of the warehouse keeps its files.

A trial compares column sets, not whole rows: arrival and processing times (`ingested_at`,
`quarantined_at`, tombstone times) naturally differ between two runs of the same log.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import PIPELINE_DIR, Warehouse

TABLES = {  # table -> columns that must match (arrival times naturally differ between runs)
    "bronze_kafka_events": ["topic", "partition", "offset", "key", "value"],
    "parsed_orders": ["kafka_offset", "event_id", "value_sha256", "errors"],
    "parsed_player_rewards": ["kafka_offset", "event_id", "errors"],
    "silver_orders": ["event_id", "sequence", "status", "kafka_offset"],
    "silver_player_rewards": ["event_id", "xp", "kafka_offset"],
    "quarantine": ["kafka_topic", "kafka_offset", "reason"],
    "orders": ["order_id", "event_id", "sequence", "status", "amount"],
    "orders_history": ["order_id", "status", "amount", "__START_AT", "__END_AT"],
    "player_xp_ledger": ["event_id", "player_id", "xp"],
    "player_xp": ["player_id", "total_xp", "xp_events"],
    "late_events": ["event_id", "reason"],
    "players_history": ["player_id", "display_name", "country", "tier", "__START_AT",
                        "__END_AT"],
}
EVENT_LOG = "event_log"
LOCK = f"{PIPELINE_DIR}/lock"
RUN_TIMEOUT = 600  # seconds a killed run may take to reach its point
POLL = 0.02  # how often the killer looks for the point's file


def write_tiny_dump(path: Path) -> Path:
    """About two dozen records of both topics, with redeliveries, out-of-order sequences,
    deletes and malformed records: every flow writes rows, in one micro-batch each."""
    write_kcat_jsonl(path, as_consumed(generate_stream(GeneratorConfig(
        events=16, orders=4, players=3, seed=21, delete_rate=0.2, malformed_rate=0.1))))
    return path


def contents(spark: SparkSession, warehouse: Path, by_delta: bool = False) -> dict[str, list]:
    """Each table's compared columns, as sorted rows. Read as the Parquet files the table's
    latest version names (`snapshot_files.read_latest`): a tenth of what Delta's reader costs
    a table the session has not read at its version (its state rebuilt, then aggregated, for
    each table of each trial). `by_delta`: through Delta's reader, to check the other against
    (`test_crash_sweep`'s reference)."""
    def read(path: str) -> DataFrame:
        return spark.read.format("delta").load(path) if by_delta else read_latest(spark, path)

    return {table: sorted(map(tuple, read(str(warehouse / table)).select(*columns).collect()))
            for table, columns in TABLES.items()}


def table_dirs(graph: PipelineGraph, warehouse: Warehouse, table: str) -> list[Path]:
    """Every directory the runtime keeps for `table`: the table, its flows' checkpoints and
    its AUTO CDC state and rejected rows."""
    return [warehouse.table_path(table), warehouse.auto_cdc_state_path(table),
            warehouse.auto_cdc_rejected_path(table),
            *(warehouse.checkpoint_path(flow.name) for flow in graph.flows_into(table))]


def owner(graph: PipelineGraph, warehouse: Warehouse, relative: str) -> str | None:
    """The table whose directories hold the file at `relative` (a path inside the warehouse);
    None for the event log and the lock, which belong to the update itself."""
    path = warehouse.root / relative
    for table in (t.name for t in graph.tables()):
        if any(path == d or d in path.parents for d in table_dirs(graph, warehouse, table)):
            return table
    return None


# -- the order an update writes its files ---------------------------------------------------------
def _is_point(relative: Path) -> bool:
    """A file whose appearance is a moment of the update worth killing it at: a Delta commit or
    the start of a table's creation (its empty `_staged_commits/`), a streaming checkpoint's
    metadata, offsets, commits and source logs, a state store's files, the lock. Temporary
    and checksum files (hidden) and data files (no commit names them yet) are not."""
    parts = relative.parts
    if any(part.startswith(".") for part in parts) or parts[-1].startswith("part-"):
        return False
    if "_delta_log" in parts:
        return parts[-1] == "_staged_commits" or (
            parts[-2] == "_delta_log" and parts[-1].endswith(".json"))
    return relative.as_posix() == LOCK or parts[:2] == (PIPELINE_DIR, "checkpoints")


def write_order(warehouse: Path) -> list[str]:
    """Every kill point of the update that wrote `warehouse`, in the order it wrote them.

    Read from the finished warehouse by modification time (ns), not by watching a run: each of
    these files is written once, to a temporary file renamed into place (which keeps the time
    of the write), and never changed again, so its time is when it appeared. Two exceptions: an
    empty directory (`_staged_commits/`) keeps its creation time, and the lock, rewritten when
    the update ends, is taken before anything else is written.
    """
    found = [(entry.stat().st_mtime_ns, entry.relative_to(warehouse))
             for entry in warehouse.rglob("*")
             if (entry.is_file() or entry.name == "_staged_commits")
             and _is_point(entry.relative_to(warehouse))]
    ordered = [p.as_posix() for _, p in sorted(found)]
    return [LOCK, *(p for p in ordered if p != LOCK)]


def first_points(graph: PipelineGraph, warehouse: Warehouse, order: list[str]) -> dict[str, int]:
    """Each table -> where in `order` its first file is: when the update began it."""
    first: dict[str, int] = {}
    for index, relative in enumerate(order):
        name = owner(graph, warehouse, relative)
        if name is not None:
            first.setdefault(name, index)
    return first


def prepare(graph: PipelineGraph, reference: Warehouse, order: list[str], table: str,
            destination: Warehouse) -> None:
    """Make `destination` what an update looks like when it starts writing `table`: every
    table it had begun before, as the reference run finished it (so everything `table` reads
    is complete), and nothing else. `--refresh table` then runs the smallest update that
    writes `table`'s files in the order the whole update did."""
    first = first_points(graph, reference, order)
    destination.root.mkdir(parents=True)
    for name, index in first.items():
        if index < first[table]:
            for source, target in zip(table_dirs(graph, reference, name),
                                      table_dirs(graph, destination, name), strict=True):
                if source.exists():
                    shutil.copytree(source, target)


# -- a killed run -----------------------------------------------------------------------------
def kill_at(args: list[str], marker: Path, name: str, root: Path) -> None:
    """Run the CLI with `args` in a process group of its own (its stderr in `root/<name>.stderr`,
    its EXACTLY_ONCE_HOME `root/home`); SIGKILL the group once `marker` exists. A run that
    ends before, or does not get there within RUN_TIMEOUT, fails the test."""
    with (root / f"{name}.stderr").open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "exactly_once.cli", *args], stdout=subprocess.DEVNULL,
            stderr=stderr, start_new_session=True,
            env=os.environ | {"EXACTLY_ONCE_HOME": str(root / "home")})
        deadline = time.monotonic() + RUN_TIMEOUT
        while not marker.exists():
            try:
                process.wait(timeout=POLL)  # the poll interval: returns once it has ended
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    pytest.fail(f"{name}: {marker} did not appear in {RUN_TIMEOUT}s")
                continue
            error = (root / f"{name}.stderr").read_text().strip()
            pytest.fail(f"{name}: the run ended (exit {process.returncode}) before "
                        f"{marker.relative_to(root)} appeared: {error}")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
