"""Session fixture: one real Kafka broker for all tests that need it.

A plugin of tests/conftest.py (`pytest_plugins`). The broker gets its
own home under pytest's tmp dir and a free port, so it never touches a developer's broker on
9092 or .local/kafka.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly_once.services import broker
from exactly_once.services.processes import free_port


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[broker.BrokerInfo]:
    home = tmp_path_factory.mktemp("kafka")
    info = broker.start(port=free_port(), home=home, timeout=90)
    try:
        yield info
    finally:
        broker.stop(home)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[broker.BrokerInfo]:
    """A broker of the test's own, which it may kill or restart: the session's is shared."""
    home = tmp_path / "kafka"
    info = broker.start(port=free_port(), home=home)
    try:
        yield info
    finally:
        broker.stop(home)
