"""`run --refresh/--full-refresh` spelled as `spark-pipelines` spells them, in this process's
Spark session."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest

from exactly_once import cli
from exactly_once.cli import common
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import write_kcat_jsonl

ERROR = "exactly-once: error: "



@pytest.fixture
def dump(tmp_path):
    path = tmp_path / "stream.jsonl"
    write_kcat_jsonl(path, generate_stream(GeneratorConfig(
        events=30, orders=6, players=3, seed=11, start=datetime(2026, 11, 1, tzinfo=timezone.utc))))
    return path


@pytest.mark.parametrize("flags", [
    ["--refresh", "a,b", "--refresh", "c"],  # spark-pipelines: a comma list, repeatable
    ["--refresh", "a", "b", "c"],  # databricks bundle run: spaces
    ["--refresh", "a, b", "c"],
])
def test_refresh_takes_comma_lists_and_spaces(flags):
    args = cli.build_parser().parse_args(["run", *flags, "--full-refresh", "x,y"])
    assert common.flat(args.refresh) == ["a", "b", "c"]
    assert common.flat(args.full_refresh) == ["x", "y"]


@pytest.mark.parametrize("other", [["--refresh", "orders"],
                                   ["--full-refresh", "orders,quarantine"]])
def test_full_refresh_all_with_a_selection_is_a_usage_error(other):
    done = subprocess.run([sys.executable, "-m", "exactly_once.cli", "run", "--full-refresh-all",
                           *other], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == ("exactly-once run: error: --full-refresh-all cannot "
                                            "be combined with --refresh or --full-refresh")


def test_refresh_of_bronze_alone_on_a_fresh_warehouse(in_session, dump, tmp_path, capsys):
    """Only bronze is updated; every other table does not exist yet and counts 0 rows."""
    warehouse = tmp_path / "warehouse"
    assert cli.main(["run", "--quiet", "--source", f"file:{dump}", "--warehouse", str(warehouse),
                     "--refresh", "bronze_kafka_events"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines()
            if line.startswith("    ")}
    assert int(rows["bronze_kafka_events"].replace(",", "")) >= 30
    assert rows["orders"] == "0" and rows["player_xp"] == "0"
    assert not (warehouse / "orders").exists()


def test_unknown_tables_are_named_with_the_known_ones(in_session, dump, tmp_path, capsys):
    assert cli.main(["run", "--quiet", "--source", f"file:{dump}", "--warehouse",
                     str(tmp_path / "warehouse"), "--refresh", "orders,nope",
                     "--full-refresh", "nada"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{ERROR}unknown tables `nope`, `nada`; the pipeline's tables are "
                           "bronze_kafka_events, orders, "), line
    assert not (tmp_path / "warehouse" / "bronze_kafka_events").exists()  # nothing ran
