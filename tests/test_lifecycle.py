"""The local services' one lifecycle (services/lifecycle.py), on real processes: a small Python
server that listens on a port once it is up, started detached, waited for, and stopped."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from exactly_once.errors import BrokerError, ObjectStoreError
from exactly_once.services import lifecycle, s3_server
from exactly_once.services.processes import free_port, pid_alive, reap

MARKER = "lifecycle-test-server"


def server(port: int, delay: float = 0.0, exit_code: int | None = None) -> list[str]:
    """A process that prints a line, sleeps `delay`, then listens on `port` (or exits)."""
    body = (f"import socket, sys, time; print('starting {MARKER}', flush=True); "
            f"time.sleep({delay}); ")
    body += (f"print('ERROR no luck', flush=True); sys.exit({exit_code})" if exit_code is not None
             else f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
                  "time.sleep(600)")
    return [sys.executable, "-c", body]


def gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap(pid)
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_service_starts_detached_is_waited_for_and_stopped(tmp_path: Path):
    port = free_port()
    log = tmp_path / "logs" / "server.out"
    process = lifecycle.launch(server(port, delay=0.5), log)
    state = lifecycle.StateFile(tmp_path / "server.json")
    state.write({"pid": process.pid, "port": port})
    try:
        assert not lifecycle.port_answers(port)  # still starting
        lifecycle.wait_ready(lambda: lifecycle.port_answers(port), lambda: None, 30,
                             lambda: "never", BrokerError, poll=0.05)
        assert state.read() == {"pid": process.pid, "port": port}
        assert lifecycle.runs(process.pid, MARKER.encode())
        assert lifecycle.log_lines(log) == [f"starting {MARKER}"]
    finally:
        assert lifecycle.stop_process(process.pid, 5, MARKER.encode())
    assert gone(process.pid)
    assert not lifecycle.runs(process.pid, MARKER.encode())
    assert not lifecycle.stop_process(process.pid, 5, MARKER.encode())  # already gone
    state.remove()
    assert state.read() is None


def test_a_pid_given_to_another_process_is_not_the_service_s(tmp_path: Path):
    """The state file's pid now names a process without the service's marker: it is neither
    running as the service nor stopped."""
    process = lifecycle.launch(server(free_port(), delay=600), tmp_path / "other.out")
    try:
        assert not lifecycle.runs(process.pid, b"some-other-service")
        assert not lifecycle.stop_process(process.pid, 5, b"some-other-service")
        assert pid_alive(process.pid)
    finally:
        lifecycle.stop_process(process.pid, 5)
    assert gone(process.pid)


def test_a_service_that_exits_while_starting_is_one_error_with_its_log(tmp_path: Path):
    log = tmp_path / "server.out"
    process = lifecycle.launch(server(free_port(), exit_code=3), log)

    def died() -> str | None:
        if process.poll() is None:
            return None
        tail = lifecycle.log_tail([log], 1, lambda line: line.startswith("ERROR"))
        return f"server exited with {process.returncode} while starting: {' | '.join(tail)}"

    with pytest.raises(BrokerError) as raised:
        lifecycle.wait_ready(lambda: False, died, 30, lambda: "never", BrokerError, poll=0.05)
    assert str(raised.value) == "server exited with 3 while starting: ERROR no luck"


def test_a_service_that_never_answers_times_out_naming_it(tmp_path: Path):
    port = free_port()
    process = lifecycle.launch(server(port, delay=600), tmp_path / "server.out")
    started = time.monotonic()
    try:
        with pytest.raises(BrokerError, match=f"server did not become ready on port {port}"):
            lifecycle.wait_ready(lambda: lifecycle.port_answers(port), lambda: None, 0.5,
                                 lambda: f"server did not become ready on port {port}",
                                 BrokerError, poll=0.05)
        assert time.monotonic() - started < 10
    finally:
        lifecycle.stop_process(process.pid, 5)


def test_a_state_file_that_is_not_a_json_object_is_no_state(tmp_path: Path):
    state = lifecycle.StateFile(tmp_path / "engine.pid")
    assert state.read() is None
    state.path.write_text("1234")  # the plain pid an older engine wrote
    assert state.read() is None
    state.path.write_text("{not json")
    assert state.read() is None


def test_a_second_start_of_a_service_on_other_arguments_is_refused(s3_store):
    """Started again as it runs, a service is returned as it is; asked for another port or
    bucket, it says what runs instead of ignoring the arguments."""
    assert s3_server.start(s3_store.home, s3_store.port, s3_store.bucket) == s3_store
    with pytest.raises(ObjectStoreError, match=f"already running on port {s3_store.port} "
                                               f"with bucket {s3_store.bucket}"):
        s3_server.start(s3_store.home, free_port(), s3_store.bucket)
    with pytest.raises(ObjectStoreError, match="with bucket"):
        s3_server.start(s3_store.home, s3_store.port, "another")
