"""The command line as a user meets it: exit codes and one-line errors, no tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from exactly_once.kafka.kcat import read_kcat_jsonl
from exactly_once.services.processes import free_port


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exactly_once.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("args, code, message", [
    (["run", "--source", "s3://x"], 2, "must be `kafka` or `file:PATH`"),
    (["generate", "--duplicate-rate", "1.5"], 2, "a rate is between 0 and 1"),
    (["generate", "--start", "last tuesday"], 2, "not an ISO-8601 timestamp"),
    (["broker", "restart"], 2, "invalid choice"),
    (["run", "--source", "file:/no/such/file.jsonl"], 1,
     "no such file or directory: /no/such/file.jsonl"),
    (["produce", "/no/such/file.jsonl"], 1, "no such file"),
    (["--target", "staging", "run"], 1, "databricks.yml: targets: no target `staging`"),
])
def test_bad_input_gets_a_one_line_error(args, code, message):
    done = cli(*args)
    assert done.returncode == code
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_broker_that_is_down_is_named_not_waited_on():
    bootstrap = f"127.0.0.1:{free_port()}"
    done = cli("run", "--bootstrap-servers", bootstrap)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"cannot reach Kafka at {bootstrap}" in done.stderr
    assert "exactly-once broker start" in done.stderr


def test_broker_status_without_a_broker(tmp_path):
    done = cli("broker", "status", "--home", str(tmp_path))
    assert (done.returncode, done.stdout.strip()) == (3, "no broker running")


def test_generate_to_a_file_then_produce_it(kafka_broker, tmp_path):
    out = tmp_path / "stream.jsonl"
    done = cli("generate", "--events", "300", "--seed", "5", "--output", str(out))
    assert done.returncode == 0, done.stderr
    records = read_kcat_jsonl(out)
    assert len(records) >= 300 and {r.topic for r in records} == {"orders", "player-rewards"}
    for topic in ("orders", "player-rewards"):  # as kcat prints them: offsets per partition
        assert [r.offset for r in records if r.topic == topic] == list(
            range(sum(r.topic == topic for r in records)))
    done = cli("produce", str(out), "--bootstrap-servers", kafka_broker.bootstrap)
    assert done.returncode == 0, done.stderr
    assert f"published {len(records):,} records" in done.stdout
