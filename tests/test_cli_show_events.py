"""`exactly-once show` and `exactly-once events` on a warehouse one update wrote, in this
process's Spark session."""

from __future__ import annotations

import os
import re
import time

import pytest
from pyspark.sql import functions as F

from exactly_once import cli
from exactly_once.local.observe import event_log
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.quality.dashboard import collect
from exactly_once.quality.graph_view import collect_graph

ERROR = "exactly-once: error: "



def error_line(capsys) -> str:
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(ERROR)
    return line.removeprefix(ERROR)


def test_show_previews_a_table(in_session, quality_run, capsys):
    rows = quality_run.result.table_rows["orders"]
    assert cli.main(["show", "orders", "--limit", "3", "--warehouse",
                     str(quality_run.warehouse)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"orders: {rows:,} rows (Delta version ")
    assert out[0].endswith(f"the first {min(rows, 3)}:")
    header = out[2]
    assert "order_id" in header and "status" in header
    assert len([line for line in out[4:] if line.startswith("|")]) == min(rows, 3)


def test_show_as_json_names_columns_whose_names_have_a_dot_or_a_backtick(spark):
    from exactly_once.cli.show import as_json

    df = spark.createDataFrame([(1, "x")], "`a.b` INT, `c``d` STRING")
    assert as_json(df) == '[\n{"a.b":1,"c`d":"x"}\n]\n'


def test_show_of_a_missing_table_lists_the_tables(in_session, quality_run, capsys):
    assert cli.main(["show", "ordres", "--warehouse", str(quality_run.warehouse)]) == 1
    line = error_line(capsys)
    assert line.startswith(f"no table `ordres` in {quality_run.warehouse} or the local catalog "
                           f"({quality_run.warehouse / '_catalog'}); its tables are ")
    tables = line.split("its tables are ")[1].split(", ")
    assert {"orders", "bronze_kafka_events", "event_log", "player_xp"} <= set(tables)
    assert "_pipeline" not in tables


def test_show_of_a_missing_warehouse(tmp_path, capsys):
    assert cli.main(["show", "orders", "--warehouse", str(tmp_path / "nope")]) == 1
    assert error_line(capsys) == \
        f"no warehouse at {tmp_path / 'nope'}; run `exactly-once run` first"


def test_events_of_the_newest_update(in_session, quality_run, capsys):
    assert cli.main(["events", "--warehouse", str(quality_run.warehouse)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"update {quality_run.result.update_id} (the newest of 1), ")
    progress = [line for line in out if "flow_progress" in line]
    timelines = [line for line in out if "flow_timeline" in line]
    assert len(progress) == len(quality_run.result.flows)
    assert len(timelines) == len(quality_run.result.flows) + 1  # and the update's own
    orders = next(line for line in progress if " orders " in line)
    result = next(f for f in quality_run.result.flows if f.flow == "orders")
    assert f"COMPLETED, {result.output_rows:,} rows out" in orders
    assert "most time in " in timelines[0]


def test_events_of_one_flow_of_an_update_by_its_id(in_session, quality_run, capsys):
    update = quality_run.result.update_id
    assert cli.main(["events", "--update", update[:8], "--flow", "silver_orders",
                     "--warehouse", str(quality_run.warehouse)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 2 and all(" silver_orders " in line for line in lines)
    assert "expectations: " in lines[0] and "dropped" in lines[0]


@pytest.fixture
def los_angeles():
    """This process in another zone: Spark hands Python timestamps as naive times of the
    process's zone (`time.tzset`), as on a laptop in Los Angeles."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/Los_Angeles"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_times_are_shown_in_utc_whatever_the_local_zone(in_session, quality_run, los_angeles,
                                                         capsys):
    """The event log's instants, as the session (UTC) writes them: `events`, the dashboard's
    updates and its graph show those, and say so, as the dashboard's "built" time does."""
    log = event_log.read(in_session, Warehouse(quality_run.warehouse))
    instants = {r.utc for r in log.select(
        F.date_format("timestamp", "yyyy-MM-dd HH:mm:ss").alias("utc")).collect()}
    shown = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC"

    assert cli.main(["events", "--warehouse", str(quality_run.warehouse)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert lines and all(re.match(shown, line) for line in lines), lines[:3]
    assert {re.match(shown, line).group(1) for line in lines} <= instants
    data = collect(in_session, quality_run.warehouse)
    graph = collect_graph(in_session, Warehouse(quality_run.warehouse).event_log_path())
    started = [u["started"] for u in data.updates] + \
        [run.started for node in graph.nodes.values() for run in node.runs]
    assert started and all(re.fullmatch(shown, s) for s in started), started[:3]
    assert {re.fullmatch(shown, s).group(1) for s in started} <= instants


@pytest.mark.parametrize("args, expected", [
    (["--update", "0000"],
     "no update `0000` in the event log; its updates (newest first): {update}"),
    (["--flow", "nope"], "no events of flow `nope` in update {update}; its flows are {flows}"),
])
def test_events_of_an_unknown_update_or_flow(in_session, quality_run, capsys, args, expected):
    assert cli.main(["events", *args, "--warehouse", str(quality_run.warehouse)]) == 1
    flows = ", ".join(sorted(flow.flow for flow in quality_run.result.flows))
    assert error_line(capsys) == expected.format(update=quality_run.result.update_id,
                                                 flows=flows)


def test_events_without_an_event_log(tmp_path, capsys):
    assert cli.main(["events", "--warehouse", str(tmp_path)]) == 1
    assert error_line(capsys) == f"no event log in {tmp_path}; run the pipeline first"
