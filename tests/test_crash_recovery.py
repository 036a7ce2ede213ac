"""A run SIGKILLed at several points, then restarted, ends with the tables of an uninterrupted run.

The pipeline runs as a real process (the CLI, with its Spark JVM); the test kills the whole
process group the moment a chosen Delta commit appears on disk: inside an update, between
tables, and right after an AUTO CDC target commit (before its state commit).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exactly_once.config import load_settings
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
from exactly_once.local.pipeline import run_pipeline

TABLES = {  # table -> columns that must match (arrival times naturally differ between runs)
    "bronze_kafka_events": ["topic", "partition", "offset", "key", "value"],
    "silver_orders": ["event_id", "sequence", "status", "kafka_offset"],
    "silver_player_rewards": ["event_id", "xp", "kafka_offset"],
    "quarantine": ["kafka_topic", "kafka_offset", "reason"],
    "orders": ["order_id", "event_id", "sequence", "status", "amount"],
    "player_xp_ledger": ["event_id", "player_id", "xp"],
    "player_xp": ["player_id", "total_xp", "xp_events"],
}
# Kill the moment this file exists: bronze's first micro-batch committed (silver not started);
# the first AUTO CDC commit on `orders` (its key-state commit not yet made); the ledger's.
KILL_AT = ["bronze_kafka_events/_delta_log/00000000000000000001.json",
           "orders/_delta_log/00000000000000000001.json",
           "player_xp_ledger/_delta_log/00000000000000000001.json"]


def contents(spark, warehouse: Path) -> dict[str, list]:
    return {table: sorted(map(tuple, spark.read.format("delta").load(str(warehouse / table))
                              .select(*columns).collect()))
            for table, columns in TABLES.items()}


def run_and_kill_when(args: list[str], marker: Path, timeout: float = 600) -> bool:
    """Run the CLI; SIGKILL its process group once `marker` exists. True if it was killed."""
    process = subprocess.Popen([sys.executable, "-m", "exactly_once.cli", *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if marker.exists():
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.05)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"run did not finish in {timeout}s")
    return False


def test_sigkill_at_several_points_then_restart_matches_an_uninterrupted_run(spark, tmp_path):
    stream = tmp_path / "stream.jsonl"
    write_kcat_jsonl(stream, as_consumed(generate_stream(
        GeneratorConfig(events=1200, orders=120, players=30, seed=21))))
    # max_offsets_per_trigger does not apply to files; one micro-batch per flow per update here
    reference = tmp_path / "reference"
    run_pipeline(spark, load_settings("local", overrides={
        "exactly_once.source": f"file:{stream}"}), reference)

    crashed = tmp_path / "crashed"
    args = ["run", "--quiet", "--source", f"file:{stream}", "--warehouse", str(crashed)]
    killed = [run_and_kill_when(args, crashed / marker) for marker in KILL_AT]
    assert killed == [True, True, True], "each kill point was reached and the run killed there"
    done = subprocess.run([sys.executable, "-m", "exactly_once.cli", *args], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert contents(spark, crashed) == contents(spark, reference)
