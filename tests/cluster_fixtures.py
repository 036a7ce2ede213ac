"""Session fixtures: one Spark standalone cluster (a master and two one-core workers) and one
S3-compatible object store (versitygw) for every test that needs them.

A plugin of tests/conftest.py (`pytest_plugins`). Both get homes under pytest's tmp dir and free
ports (master, web UI, workers, S3), so they never touch a developer's `.local/` or another
test run on this machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly_once.services import cluster, s3_server
from exactly_once.services.processes import free_port


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterInfo]:
    home = tmp_path_factory.mktemp("cluster")
    info = cluster.start(home, port=free_port())
    try:
        yield info
    finally:
        cluster.stop(home)


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    home = tmp_path_factory.mktemp("s3")
    server = s3_server.start(home, port=free_port())
    try:
        yield server
    finally:
        s3_server.stop(home)


def run_cli(args: list[str], home: Path, env: dict[str, str] | None = None,
            cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """`exactly-once ARGS` as a process of its own (its own driver JVM), as a user runs it."""
    return subprocess.run([sys.executable, "-m", "exactly_once.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd,
                          env=os.environ | {"EXACTLY_ONCE_HOME": str(home)} | (env or {}))


def start_cli(args: list[str], home: Path, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
    """`run_cli` that returns at once: the caller watches it, then waits for it."""
    return subprocess.Popen([sys.executable, "-m", "exactly_once.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env=os.environ | {"EXACTLY_ONCE_HOME": str(home)} | (env or {}))
