"""Session fixtures: one Spark standalone cluster (a master and two one-core workers) and one
S3-compatible object store (versitygw) for every test that needs them.

A plugin of tests/conftest.py (`pytest_plugins`). Both get homes under pytest's tmp dir and free
ports (master, web UI, workers, S3), so they never touch a developer's `.local/` or another
test run on this machine.

Under `pytest -n 2 --dist loadfile` (`make test`) a session fixture is set up once per worker.
The files that ask for `spark_cluster` are therefore handed to one worker as one unit
(`pytest_xdist_make_scheduler`): one cluster for the suite, not one per worker (three JVMs
started and idling for the rest of the run, and a second cluster start on the critical path).
Not one cluster shared by both workers: its tests count the applications it ran and kill its
workers, which another worker's update on it would see.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from exactly_once.services import cluster, s3_server
from exactly_once.services.processes import free_port

CLUSTER_FILES = "the files that use spark_cluster"  # their unit of work under loadfile


@cache
def _uses_cluster(path: Path) -> bool:
    return path.suffix == ".py" and path.is_file() and "spark_cluster" in path.read_text()


@pytest.hookimpl(optionalhook=True)  # xdist's hook: `-p no:xdist` has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201 - xdist's
    """`--dist loadfile`, but with every file that names `spark_cluster` in one unit of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ClusterFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return CLUSTER_FILES if _uses_cluster(config.rootpath / file) else file

    return ClusterFilesTogether(config, log)


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
