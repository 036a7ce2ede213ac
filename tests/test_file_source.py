"""`--source file:` over kcat dumps: one file, a directory of them or a glob, each dump read
exactly once across updates, as Spark's file source reads with its checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from exactly_once.cli.common import resolve_source
from exactly_once.errors import SettingsError
from exactly_once.kafka.kcat import KafkaRecord, kcat_dump_files, write_kcat_jsonl
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.settings.pipeline import load_settings

BRONZE = "bronze_kafka_events"


def dump(path, first_offset: int, count: int):
    """`count` records of `orders` partition 0 from `first_offset`: bronze keeps them as is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_kcat_jsonl(path, [KafkaRecord("orders", f"o{n}", "{}", partition=0, offset=n,
                                        timestamp_ms=1_793_491_200_000)
                            for n in range(first_offset, first_offset + count)])
    return path


# -- what a source names (no Spark) --------------------------------------------------------------
def test_a_directory_names_the_dumps_below_it_but_not_hidden_ones(tmp_path):
    day1 = dump(tmp_path / "in" / "day1.jsonl", 0, 1)
    day2 = dump(tmp_path / "in" / "2026-11-02" / "day2.jsonl", 1, 1)
    dump(tmp_path / "in" / ".day3.jsonl.swp", 2, 1)
    (tmp_path / "in" / "_SUCCESS").touch()
    assert kcat_dump_files(tmp_path / "in") == [day2, day1]
    assert kcat_dump_files(tmp_path / "in" / "*.jsonl") == [day1]
    assert kcat_dump_files(day2) == [day2]


def test_resolving_makes_the_path_absolute_and_requires_a_dump(tmp_path, monkeypatch):
    dump(tmp_path / "in" / "day1.jsonl", 0, 1)
    monkeypatch.chdir(tmp_path)
    assert resolve_source("file:in") == f"file:{tmp_path / 'in'}"
    assert resolve_source("file:in/*.jsonl") == f"file:{tmp_path / 'in'}/*.jsonl"
    assert resolve_source("kafka") == "kafka"
    (tmp_path / "empty").mkdir()
    for source, message in [("file:nowhere", f"no such file or directory: {tmp_path}/nowhere"),
                            ("file:in/*.json", f"no kcat dump matches {tmp_path}/in/\\*.json"),
                            ("file:empty", f"no kcat dump matches {tmp_path}/empty"),
                            ("file:", "must be `kafka` or `file:PATH`")]:
        with pytest.raises(SettingsError, match=message):
            resolve_source(source)


@pytest.mark.parametrize("source, code, message", [
    ("file:{tmp}/*.jsonl", 1, "no kcat dump matches {tmp}/*.jsonl"),
    ("file:{tmp}/nothing-here", 1, "no such file or directory: {tmp}/nothing-here"),
    ("file:", 2, "must be `kafka` or `file:PATH`"),
])
def test_the_cli_names_a_source_without_dumps_in_one_line(tmp_path, source, code, message):
    done = subprocess.run([sys.executable, "-m", "exactly_once.cli", "run", "--source",
                           source.format(tmp=tmp_path), "--warehouse", str(tmp_path / "wh")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == code
    lines = done.stderr.splitlines()
    assert message.format(tmp=tmp_path) in lines[-1] and "Traceback" not in done.stderr
    if code == 1:  # argparse prints its usage above a bad argument (exit 2)
        assert len(lines) == 1, done.stderr


# -- what an update reads (Spark) -----------------------------------------------------------------
def update(spark, source: str, warehouse, only_bronze: bool = False) -> list[int]:
    """One update from `source` as the CLI resolves it; the offsets bronze then holds.

    `only_bronze` (`--refresh bronze_kafka_events`) keeps later updates small; the first one
    builds every table, because an update counts the rows of all of them at the end.
    """
    settings = load_settings("local", overrides={"exactly_once.source": resolve_source(source)})
    run_pipeline(spark, settings, warehouse, refresh=[BRONZE] if only_bronze else [])
    rows = spark.read.format("delta").load(str(warehouse / BRONZE)).select("offset").collect()
    return sorted(r.offset for r in rows)


def test_a_directory_reads_each_dump_once_and_new_ones_in_the_next_update(spark, tmp_path):
    inbox, warehouse = tmp_path / "inbox", tmp_path / "warehouse"
    dump(inbox / "day1.jsonl", 0, 3)
    dump(inbox / "2026-11-02" / "day2.jsonl", 3, 2)  # a directory per day works too
    assert update(spark, f"file:{inbox}", warehouse) == list(range(5))

    # A dump copied in late with its original time (30 days old): still new to the stream.
    late = dump(inbox / "day3.jsonl", 5, 4)
    month_ago = time.time() - 30 * 86400
    os.utime(late, (month_ago, month_ago))
    assert update(spark, f"file:{inbox}", warehouse, only_bronze=True) == list(range(9))
    assert update(spark, f"file:{inbox}", warehouse, only_bronze=True) == list(range(9))


def test_a_glob_reads_only_what_it_matches(spark, tmp_path):
    inbox = tmp_path / "inbox"
    dump(inbox / "orders-1.jsonl", 0, 2)
    dump(inbox / "orders-2.jsonl", 2, 1)
    (inbox / "README.txt").write_text("not a dump, not JSON: reading it would fail the update\n")
    assert update(spark, f"file:{inbox}/orders-*.jsonl", tmp_path / "wh") == [0, 1, 2]
