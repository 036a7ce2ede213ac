"""`exactly-once run --continuous`: stopped by SIGTERM and SIGINT at random moments, restarted
with more dumps arrived, it ends with the model's tables, nothing lost or doubled.

The pipeline runs as a real process (the CLI and its JVM) over a directory of kcat dumps; new
dumps are read by the next update. Each stop moment is drawn (seeded) after the run has
demonstrably committed an update, and the test only polls the filesystem.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reference import Delivered, expected_tables, quarantined_offsets, xp_ledger, xp_totals

from exactly_once.errors import SettingsError
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
from exactly_once.local.execution.checkpoints import replayed_batch
from exactly_once.local.execution.continuous import parse_interval
from exactly_once.local.storage.delta_log import versions
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import Warehouse

SEED = 20
STOP_BOUND = 300  # seconds from the signal to the exit: the update in progress, then the JVM
START_BOUND = 600  # seconds until a started run has committed an update (2 shared cores)


def test_trigger_intervals_read_as_spark_reads_them():
    assert [parse_interval(t) for t in ("10s", "500ms", "2 minutes", "1h", "3", "1.5 sec")] \
        == [10.0, 0.5, 120.0, 3600.0, 3.0, 1.5]
    for bad in ("0s", "ten", "5 days", "-1s"):
        with pytest.raises(SettingsError, match="not a trigger interval"):
            parse_interval(bad)


def _updates(warehouse: Path) -> int:
    """Updates committed so far: one event-log commit each."""
    return len(versions(Warehouse(warehouse).event_log_path()))


class ContinuousRun:
    def __init__(self, dumps: Path, warehouse: Path, logs: Path):
        self.warehouse, self.stdout, self.stderr = warehouse, logs / "out.txt", logs / "err.txt"
        with self.stdout.open("w") as out, self.stderr.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "exactly_once.cli", "run", "--continuous",
                 "--trigger-interval", "1s", "--quiet", "--source", f"file:{dumps}",
                 "--warehouse", str(warehouse)],
                stdout=out, stderr=err, start_new_session=True)  # its own process group

    def wait_until(self, done, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if self.process.poll() is not None:
                pytest.fail(f"the run exited ({self.process.returncode}) before {what}: "
                            f"{self.stderr.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"no {what} within {timeout}s")
            time.sleep(0.05)

    def stop(self, sig: signal.Signals, group: bool) -> float:
        """Send `sig`; the seconds until the process exited."""
        sent = time.monotonic()
        (os.killpg if group else os.kill)(self.process.pid, sig)
        try:
            self.process.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running {STOP_BOUND}s after {sig.name}")
        return time.monotonic() - sent

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def _stop_at_a_random_moment(run: ContinuousRun, rng: random.Random, sig: signal.Signals,
                             group: bool, before: int) -> None:
    """Once the run committed an update, wait a drawn moment, stop it with `sig`, and require a
    clean stop: exit 0 within the bound, one summary line, every update it began committed."""
    run.wait_until(lambda: _updates(run.warehouse) > before, START_BOUND, "committed update")
    holder = json.loads(Warehouse(run.warehouse).lock_path().read_text())
    assert holder["pid"] == run.process.pid, "the lock is held between updates"
    moment = time.monotonic() + rng.uniform(0.0, 4.0)
    while time.monotonic() < moment and run.process.poll() is None:
        time.sleep(0.05)
    seconds = run.stop(sig, group)
    out, err = run.stdout.read_text(), run.stderr.read_text()
    assert run.process.returncode == 0, err[-2000:]
    assert "Traceback" not in err and f"{sig.name}: stopping after the current update" in err
    assert seconds < STOP_BOUND
    finished = [line for line in out.splitlines() if line.startswith("update ")]
    summary = out.splitlines()[-1]
    assert summary.startswith(f"Continuous run stopped ({sig.name}) after {len(finished)} "
                              "update"), out
    assert _updates(run.warehouse) == before + len(finished), "each update it began committed"
    # Stopped after whole micro-batches: no checkpoint holds offsets without their commit.
    checkpoints = Warehouse(run.warehouse).checkpoint_path("x").parent
    assert [c.name for c in checkpoints.iterdir() if replayed_batch(c) is not None] == []


def test_continuous_runs_stopped_at_random_moments_end_with_the_model_s_tables(spark, tmp_path):
    records = as_consumed(generate_stream(GeneratorConfig(
        events=36, orders=6, players=4, malformed_rate=0.05, seed=SEED)))
    dumps, warehouse = tmp_path / "dumps", tmp_path / "warehouse"
    dumps.mkdir()
    thirds = [records[i * len(records) // 3:(i + 1) * len(records) // 3] for i in range(3)]
    rng = random.Random(SEED)

    write_kcat_jsonl(dumps / "part-0.jsonl", thirds[0])
    (tmp_path / "run-1").mkdir()
    first = ContinuousRun(dumps, warehouse, tmp_path / "run-1")
    first.wait_until(lambda: _updates(warehouse) >= 1, START_BOUND, "first update")
    write_kcat_jsonl(dumps / "part-1.jsonl", thirds[1])  # arrives while it runs
    # SIGTERM to the process, as a service manager sends it.
    _stop_at_a_random_moment(first, rng, signal.SIGTERM, group=False, before=0)

    write_kcat_jsonl(dumps / "part-2.jsonl", thirds[2])
    (tmp_path / "run-2").mkdir()
    second = ContinuousRun(dumps, warehouse, tmp_path / "run-2")
    # SIGINT to the process group, as Ctrl-C in a terminal sends it (the JVM ignores it).
    _stop_at_a_random_moment(second, rng, signal.SIGINT, group=True,
                             before=_updates(warehouse))

    delivered = [Delivered(r.topic, r.partition, r.offset, r.key, r.payload, r.timestamp_ms)
                 for r in records]
    topics = {"orders": "order_id", "player-rewards": "player_id"}
    expected = expected_tables(delivered, topics)
    table = lambda name: read_latest(spark, str(warehouse / name))  # noqa: E731
    bronze = sorted(tuple(r) for r in table("bronze_kafka_events")
                    .select("topic", "partition", "offset").collect())
    assert bronze == sorted((d.topic, d.partition, d.offset) for d in delivered), \
        "bronze holds every record once"
    assert sorted(tuple(r) for r in table("quarantine").select(
        "kafka_topic", "kafka_partition", "kafka_offset").collect()) \
        == quarantined_offsets(delivered, topics)
    for name, topic in [("silver_orders", "orders"), ("silver_player_rewards", "player-rewards")]:
        ids = [r.event_id for r in table(name).select("event_id").collect()]
        assert len(ids) == len(set(ids)) and set(ids) == expected.silver_event_ids[topic], name
    orders = {r.order_id: (r.event_id, r.sequence) for r in table("orders").collect()}
    assert orders == {k: (e["event_id"], e["sequence"]) for k, e in expected.orders.items()}
    ledger = xp_ledger(delivered)
    ids = [r.event_id for r in table("player_xp_ledger").select("event_id").collect()]
    assert sorted(ids) == sorted(ledger), "each grant applied once"
    assert {r.player_id: (r.total_xp, r.xp_events) for r in table("player_xp").collect()} \
        == xp_totals(ledger)
