"""Shared fixtures: one SparkSession for the whole run, plus the session fixtures of the plugins
below (the real local Kafka broker; one pipeline run and GX validation for the quality tests;
one Spark standalone cluster and one S3-compatible store for the tests beyond one machine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exactly_once.settings.pipeline import Settings, load_settings

# Bundles the tests run (tests/bundles/*): their own tests run in their own pytest
# (test_pytest_plugin.py), as a team runs them, not in this one.
collect_ignore_glob = ["bundles/*"]

# Registered once for the whole run, so each session fixture in them is set up once: a test module
# that imported a fixture by name would get a definition (and a setup) of its own.
pytest_plugins = ["kafka_fixtures", "quality_fixtures", "cluster_fixtures", "stub_workspace"]

# Every command the suite runs, in-process or as an `exactly-once` process, runs where the test
# says: a resident engine a developer left running must not take them (test_resident_engine
# starts one of its own and lets its processes use it).
os.environ["EXACTLY_ONCE_ENGINE"] = "off"

# The `exactly-once` processes the suite starts (a run killed mid-update, a CLI's one-line error)
# each run one small update: their JVMs compile with C1 alone, 0.80-0.84 of a process's time
# (engine/jvm_options.py), unless the environment chose. This process's own session runs
# hundreds of updates: tiered.
os.environ.setdefault("EXACTLY_ONCE_JIT", "c1")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from exactly_once.local.engine.jvm_processes import start_flight_recorder
    from exactly_once.local.engine.session import build_session

    session = build_session(tmp_path_factory.mktemp("spark-warehouse"), app_name="tests",
                            jit="tiered")
    # Before any test compiles anything: the recorder's start throws compiled code away.
    start_flight_recorder(session)
    yield session
    session.stop()


@pytest.fixture
def in_session(spark, monkeypatch):
    """`cli.main` runs a command as a user runs it, in this process's Spark session: the
    command's exit code and output are its own, with no JVM start per test."""
    from exactly_once.local.engine import session

    monkeypatch.setattr(session, "build_session", lambda *args, **kwargs: spark)
    monkeypatch.setattr(spark, "stop", lambda: None)
    return spark


@pytest.fixture(scope="session")
def settings() -> Settings:
    return load_settings("local")


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return tmp_path / "warehouse"
