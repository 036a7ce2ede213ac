"""Helpers of the benchmarks: sizes on disk, the commit, a session as the suite's, a JVM's CPU
seconds, a bronze table of a kcat file, a timed update into a new warehouse, kcat feeds that
grow in parts, and a warehouse with a history whose warm updates count their Spark jobs."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import KafkaRecord, as_consumed, write_kcat_jsonl

REPO = Path(__file__).resolve().parents[1]


def du(path: Path) -> int:
    """Bytes of every file under `path` (0 if it does not exist)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def mib(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"


def jvm_cpu(pid: int) -> float:
    """User and system CPU seconds process `pid` (a Spark driver's JVM) has spent so far."""
    return cpu_seconds(f"/proc/{pid}")


def cpu_seconds(proc: str) -> float:
    """User and system CPU seconds so far of `/proc/<pid>` or `/proc/<pid>/task/<tid>`."""
    fields = Path(proc, "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_bronze(spark: Any, dump: Path, table: Path) -> None:
    """`table`: the kcat file `dump` as the pipeline's bronze table has it (one availableNow
    append, its checkpoint beside the table)."""
    from exactly_once.transforms.bronze import read_kcat_file, with_ingestion_time

    with_ingestion_time(read_kcat_file(spark, f"file:{dump}")).writeStream.format("delta") \
        .option("checkpointLocation", str(table.with_name(table.name + "_checkpoint"))) \
        .trigger(availableNow=True).start(str(table)).awaitTermination()


def suite_session(work: Path) -> Any:
    """A Spark session as the suite's workers have theirs (tests/conftest.py): tiered JIT, the
    Flight Recorder started before anything is compiled (its start discards compiled code)."""
    from exactly_once.local.engine.jvm_processes import start_flight_recorder
    from exactly_once.local.engine.session import build_session

    spark = build_session(work / "spark", jit="tiered")
    start_flight_recorder(spark)
    return spark


def driver_pid(spark: Any) -> int:
    """The process id of the session's driver JVM (for `jvm_cpu`)."""
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())


def timed_update(spark: Any, settings: Any, warehouse: Path) -> tuple[float, float]:
    """One update of the project's pipeline into `warehouse`, removed after: its wall seconds and
    the seconds of CPU the session's driver JVM spent on it (`jvm_cpu`)."""
    from exactly_once.local.execution.pipeline import run_pipeline

    pid = driver_pid(spark)
    cpu, began = jvm_cpu(pid), time.monotonic()
    run_pipeline(spark, settings, warehouse)
    measured = time.monotonic() - began, jvm_cpu(pid) - cpu
    shutil.rmtree(warehouse)
    return measured


def feed_settings(work: Path, events: int) -> Any:
    """The project's local settings with a file source of `events` generated events
    (`Feed.for_history` under `work`): what a new warehouse's update in a benchmark reads."""
    from exactly_once.settings.pipeline import load_settings

    feed = Feed.for_history(work / "feed", events)
    feed.append(events, seed=1)
    return replace(load_settings("local"), source=feed.source)


def ab_pairs(update: Callable[[str], tuple[float, float]], pairs: int) -> None:
    """Side A against side B in one session: `update(side)` -> (wall s, driver JVM CPU s), once
    each way as a warm-up (ABBA, not measured), then `pairs` pairs alternated (AB, BA, ...), so
    both sides see the same machine. Prints each update, then the means, A / B and the medians'
    ratio."""
    for side in "ABBA":
        update(side)
    rows: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    for i in range(pairs):
        for side in ("AB" if i % 2 == 0 else "BA"):
            rows[side].append(update(side))
            wall, cpu = rows[side][-1]
            print(f"{side} wall {wall:6.2f} s, JVM CPU {cpu:6.2f} s", flush=True)
    for k, measure in enumerate(("wall", "JVM CPU")):
        a, b = ([r[k] for r in rows[side]] for side in "AB")
        print(f"{measure}: A {statistics.mean(a):.2f} s, B {statistics.mean(b):.2f} s, "
              f"A / B {statistics.mean(a) / statistics.mean(b):.3f} "
              f"(medians {statistics.median(a) / statistics.median(b):.3f})")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


def commit() -> str:
    """Short HEAD, with +dirty when src/ or pipelines/ differ from it (what the numbers measure)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    dirty = git("status", "--porcelain", "--", "src", "pipelines")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def stream_records(events: int, seed: int = 1) -> list[KafkaRecord]:
    """One generated stream as consumed from partition 0: 20% duplicates, 10% out of order,
    1% malformed; one order per 10 events, one player per 50 (the BENCHMARKS.md shape)."""
    return as_consumed(generate_stream(GeneratorConfig(
        events=events, orders=max(events // 10, 1), players=max(events // 50, 1),
        duplicate_rate=0.2, late_redelivery_rate=0.0, out_of_order_rate=0.1,
        malformed_rate=0.01, seed=seed)))


@dataclass
class Feed:
    """A topic on disk as `part-NNN.jsonl` files, read with the source glob `file:DIR/part-*`.

    Each part is a fresh generated stream (its own seed, so new event ids) over the same orders
    and players, made to continue the parts before it as one topic would: offsets go on from the
    last part's (as_consumed restarts at 0, and bronze would take a repeated offset for a
    redelivery), event time starts after the last Kafka timestamp, and each order's sequence
    numbers go on from its highest so far (the generator restarts every order at 1, which gold
    would ignore as stale).
    """

    directory: Path
    orders: int
    players: int
    parts: int = 0
    next_offset: dict[str, int] = field(default_factory=dict)
    max_sequence: dict[str, int] = field(default_factory=dict)
    event_ids: set[str] = field(default_factory=set)
    last_ms: int = 0

    @classmethod
    def for_history(cls, directory: Path, history: int) -> Feed:
        directory.mkdir(parents=True, exist_ok=True)
        return cls(directory, orders=max(history // 10, 1), players=max(history // 50, 1))

    @property
    def source(self) -> str:
        return f"file:{self.directory.resolve()}/part-*.jsonl"

    def append(self, events: int, seed: int) -> int:
        """Writes the next part with `events` original events; returns its record count."""
        start = (datetime.fromtimestamp(self.last_ms / 1000, timezone.utc) + timedelta(minutes=1)
                 if self.last_ms else GeneratorConfig.start)
        records = as_consumed(generate_stream(GeneratorConfig(
            events=events, orders=self.orders, players=self.players, seed=seed, start=start)))
        payloads = [_object(r.payload) for r in records]
        ids = {p["event_id"] for p in payloads if isinstance(p.get("event_id"), str)}
        # Different seeds give different UUIDs; should two ever meet, keep this part's apart.
        prefix = f"part{self.parts}-" if ids & self.event_ids else ""
        base = dict(self.max_sequence)  # this part's sequences go on from the previous parts'
        part = [self._continued(r, p, base, prefix) for r, p in zip(records, payloads,
                                                                    strict=True)]
        for record in part:
            self.next_offset[record.topic] = max(self.next_offset.get(record.topic, 0),
                                                 (record.offset or 0) + 1)
            self.last_ms = max(self.last_ms, record.timestamp_ms or 0)
        self.event_ids |= {prefix + i for i in ids}
        write_kcat_jsonl(self.directory / f"part-{self.parts:03d}.jsonl", part)
        self.parts += 1
        return len(part)

    def _continued(self, record: KafkaRecord, payload: dict, base: dict[str, int],
                   prefix: str) -> KafkaRecord:
        record = replace(record, offset=(record.offset or 0) + self.next_offset.get(
            record.topic, 0))
        if not payload:  # not a JSON object (a malformed record): bytes left as generated
            return record
        order, sequence = payload.get("order_id"), payload.get("sequence")
        if isinstance(order, str) and type(sequence) is int:
            payload["sequence"] = sequence + base.get(order, 0)
            self.max_sequence[order] = max(self.max_sequence.get(order, 0), payload["sequence"])
        if prefix and isinstance(payload.get("event_id"), str):
            payload["event_id"] = prefix + payload["event_id"]
        # Same dumps as the generator, so a duplicate's bytes still equal its original's.
        return replace(record, payload=json.dumps(payload))


def _object(payload: str | None) -> dict:
    """The payload as a fresh dict, or {} when it is not a JSON object."""
    try:
        value = json.loads(payload or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def history_warehouse(work: Path) -> tuple[Any, int, Feed, Any]:
    """The user's loop, set up as the suite's session has it: a warm session (`suite_session`),
    its driver's pid, a feed of a 1,000-event history (`Feed`), the settings that read it, and
    `work / "warehouse"` built from it by one update. Benchmarks then append 80 events an update."""
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.settings.pipeline import load_settings

    spark = suite_session(work)
    feed = Feed.for_history(work / "feed", 1000)
    feed.append(1000, seed=1000)
    settings = replace(load_settings("local"), source=feed.source)
    run_pipeline(spark, settings, work / "warehouse")
    return spark, driver_pid(spark), feed, settings



def newest_job(spark: Any) -> int:
    """The newest job's id in Spark's status store, once its listener bus has delivered every
    event so far."""
    from exactly_once.local.observe.timeline import last_job_id

    spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty()
    return last_job_id(spark)


def counted_update(spark: Any, pid: int, feed: Feed, settings: Any, warehouse: Path, seed: int,
                   side: str) -> tuple[float, float]:
    """One update of a `history_warehouse` after 80 more events: (wall s, driver JVM CPU s),
    and a line with the Spark jobs it ran, under `side`."""
    from exactly_once.local.execution.pipeline import run_pipeline

    feed.append(80, seed=seed)
    first = newest_job(spark)
    cpu, began = jvm_cpu(pid), time.monotonic()
    run_pipeline(spark, settings, warehouse)
    wall, cpu = time.monotonic() - began, jvm_cpu(pid) - cpu
    print(f"  {side}: {newest_job(spark) - first} Spark jobs", flush=True)
    return wall, cpu

def previous_version(path: str) -> str:
    """The commit that wrote `src/exactly_once/<path>` as it was before its last change: the
    default baseline of an A/B of that module."""
    commits = subprocess.run(["git", "log", "-n", "2", "--format=%h", "--",
                              f"src/exactly_once/{path}"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    if len(commits) < 2:
        raise SystemExit(f"src/exactly_once/{path} has no earlier version to compare with")
    return commits[1]


def baseline_module(revision: str, path: str, scratch: Path) -> ModuleType:
    """`src/exactly_once/<path>` as at `revision`, imported as a module of its own
    (`baseline_<stem>`) beside this tree's, for an A/B of two commits' code in one session. Its
    imports of `auto_cdc.changes` go to the baseline's `changes`: load that one first."""
    source = subprocess.run(["git", "show", f"{revision}:src/exactly_once/{path}"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    source = source.replace("exactly_once.local.auto_cdc.changes import",
                            "baseline_changes import")
    name = "baseline_" + Path(path).stem
    file = scratch / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
