"""Shared fixtures: one SparkSession for the whole run, and the real local Kafka broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_fixtures import kafka_broker  # noqa: F401  (session fixture: a real KRaft broker)

from exactly_once.config import Settings, load_settings


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from exactly_once.local.session import build_session

    session = build_session(tmp_path_factory.mktemp("spark-warehouse"), app_name="tests",
                            shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def settings() -> Settings:
    return load_settings("local")


@pytest.fixture
def warehouse(tmp_path) -> Path:
    return tmp_path / "warehouse"
