"""The pytest plugin as a team uses it (issue "Test your pipeline with pytest"): `pytest` in a
bundle's folder, with no conftest of its own, runs the bundle's tests against its pipeline.

tests/bundles/tested_taxis is written as Databricks' templates are (its own files): its tests
are a dataset unit test, a whole update over an external fixture table, a two-update
incremental test, a YAML test, and the templates' `spark`, `load_fixture` and Databricks
Connect's session reading the fixture table after a test gave its pipeline rows of its own.
They run in a pytest of their own (a process, as a team runs them), next to the first four
with one expected row wrong, each of which must fail with a diff that names the row.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

BUNDLE = Path(__file__).parent / "bundles" / "tested_taxis"

# (file, the expected text made wrong, the wrong text, the diff's lines that name the row)
WRONG = {
    "test_fares_by_zip_alone": (
        "test_taxis.py", '"trips": 2, "total_fare": 12.5', '"trips": 2, "total_fare": 13.0',
        ["missing | 10103      | 2     | 13.0", "extra   | 10103      | 2     | 12.5"]),
    "test_an_update_over_the_fixture_table": (
        "test_taxis.py", '"trips": 1, "total_fare": 18.5', '"trips": 1, "total_fare": 21.0',
        ["missing | 10199      | 1     | 21.0", "extra   | 10199      | 1     | 18.5"]),
    "test_rides_arrive_in_two_updates": (
        "test_taxis.py", '[{"zip": 1, "rides": 2}', '[{"zip": 1, "rides": 3}',
        ["missing | 1   | 3", "extra   | 1   | 2"]),
    "trips of no distance are dropped": (
        "taxis.pipeline_test.yml", "{pickup_zip: 10103, trips: 1, total_fare: 8.0}",
        "{pickup_zip: 10103, trips: 2, total_fare: 8.0}",
        ["missing | 10103      | 2     | 8.0", "extra   | 10103      | 1     | 8.0"]),
}
# The bundle's tests that have no wrong copy: a test's given rows are its own, and the
# templates' `spark` and `load_fixture` read the fixture table by its name.
RIGHT_ONLY = ["test_a_test_gives_the_trips_table_rows_of_its_own",
              "test_the_trips_table_by_its_name", "test_a_fixture_file_by_its_name",
              "test_databricks_connect_gives_the_same_session"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, str | None]:
    """Each test of the bundle, and of its copy with one row wrong (`wrong_` files): None when
    it passed, else its failure's text."""
    root = tmp_path_factory.mktemp("bundle") / "tested_taxis"
    shutil.copytree(BUNDLE, root)
    tests = root / "tests"
    for name, (file, right, wrong, _) in WRONG.items():
        source = tests / file
        text = source.read_text()
        assert right in text, (name, right)
        copy = tests / f"wrong_{file}"
        copy.write_text((copy.read_text() if copy.exists() else text).replace(right, wrong))
    (tests / "wrong_test_taxis.py").rename(tests / "test_wrong_taxis.py")
    report = root / "report.xml"
    env = {**os.environ, "EXACTLY_ONCE_ENGINE": "off"}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           f"--junitxml={report}"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=900)
    assert report.is_file(), done.stdout + done.stderr
    found: dict[str, str | None] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        wrong = "wrong" in case.get("classname", "")
        found[("wrong " if wrong else "") + case.get("name", "")] = \
            None if failure is None else (failure.get("message", "") + (failure.text or ""))
    return found


def test_the_bundle_s_own_tests_pass(outcomes):
    right = {name: failure for name, failure in outcomes.items() if not name.startswith("wrong")}
    assert right == {name: None for name in [*WRONG, *RIGHT_ONLY]}, right


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_expected_row_fails_with_a_diff_that_names_it(outcomes, name):
    failure = outcomes.get(f"wrong {name}")
    assert failure is not None, f"the wrong copy of `{name}` passed: {sorted(outcomes)}"
    for line in WRONG[name][3]:
        assert line in failure, failure
    assert "1 missing, 1 extra" in failure, failure


def test_the_plugin_costs_nothing_at_import():
    """A pytest session that asks for none of its fixtures: no pyspark, no bundle read."""
    done = subprocess.run([sys.executable, "-c", "import sys, exactly_once.testing.plugin; "
                           "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                           "('pyspark', 'py4j', 'yaml')))"], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_this_project_s_pipeline_tested_with_the_plugin(pipeline):
    """The plugin on this repository's own bundle (its conf/ settings): Kafka records given as
    kcat envelopes, a redelivery and a stale update among them; gold holds each order's newest
    state once, and the ledger each grant once, over two updates."""
    from events import grant, order

    from exactly_once.testing import assert_table

    ts = 1_795_255_260_000  # the records' Kafka timestamps: after the events' occurred_at
    pipeline.given("orders", [
        {"key": "o1", "payload": order("e1", "o1", 1, status="created"), "ts": ts},
        {"key": "o1", "payload": order("e2", "o1", 2, status="paid"), "ts": ts + 1},
        {"key": "o1", "payload": order("e2", "o1", 2, status="paid"), "ts": ts + 2},
    ])
    pipeline.given("player-rewards", [{"key": "p1", "payload": grant("g1", "p1", 5), "ts": ts}])
    counts = pipeline.update()
    assert counts["silver_orders"]["duplicates_dropped"] == 1
    assert_table(pipeline.table("orders"), [{"order_id": "o1", "status": "paid"}])
    # `table` is Delta's reader, whose queries see later updates; `snapshot` is the table as
    # it was when asked for.
    held, first = pipeline.table("orders"), pipeline.snapshot("orders")
    pipeline.given("orders", [  # a stale redelivery of the first event, and a new one
        {"key": "o1", "payload": order("e1", "o1", 1, status="created"), "ts": ts + 3},
        {"key": "o2", "payload": order("e3", "o2", 1, status="created"), "ts": ts + 4},
    ])
    pipeline.given("player-rewards", [{"key": "p1", "payload": grant("g2", "p1", 7), "ts": ts}])
    pipeline.update()
    assert_table(pipeline.table("orders"), [{"order_id": "o1", "status": "paid"},
                                            {"order_id": "o2", "status": "created"}])
    assert_table(pipeline.snapshot("orders"), [{"order_id": "o1", "status": "paid"},
                                               {"order_id": "o2", "status": "created"}])
    assert_table(held, [{"order_id": "o1", "status": "paid"},
                        {"order_id": "o2", "status": "created"}])
    assert_table(first, [{"order_id": "o1", "status": "paid"}])
    assert_table(pipeline.table("player_xp"), [{"player_id": "p1", "total_xp": 12}])
