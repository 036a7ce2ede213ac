"""The resident engine's lifecycle: the process that keeps one warm Spark session and runs the
commands of `exactly-once` processes in it (cli/engine_server.py serves them,
cli/engine_client.py sends them). `exactly-once engine start|stop|status`.

Its home (ENGINE_DIR, `.local/engine/`):

    home/engine.pid    pid of the running engine (the pid file)
    home/engine.sock   the Unix socket it listens on, once warm
    home/engine.log    what it prints
    home/engine.lock   held by a start while it looks for an engine and launches one
"""

from __future__ import annotations

import fcntl
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from exactly_once.errors import EngineError
from exactly_once.paths import ENGINE_DIR
from exactly_once.services import lifecycle

# The server module, started as a program of its own; its socket is the readiness probe.
SERVER = "exactly_once.cli.engine_server"


@dataclass(frozen=True)
class EngineInfo:
    pid: int
    socket: Path
    log: Path


def socket_path(home: Path) -> Path:
    return home / "engine.sock"


def _state(home: Path) -> lifecycle.StateFile:
    return lifecycle.StateFile(home / "engine.pid")


def log_path(home: Path) -> Path:
    return home / "engine.log"


def answers(path: Path) -> bool:
    """Whether the engine accepts a connection on its socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def status(home: Path = ENGINE_DIR) -> EngineInfo | None:
    """The running engine of `home`, or None."""
    state = _state(home).read()
    if state is None or not lifecycle.runs(state["pid"]) or not answers(socket_path(home)):
        return None
    return EngineInfo(state["pid"], socket_path(home), log_path(home))


def start(home: Path = ENGINE_DIR, timeout: float = 600) -> EngineInfo:
    """Start the engine (or find it running, or warming: another start launched it); returns
    once it is warm and listening. Starts at once launch one engine: whoever holds the start
    lock launches, the others find its pid and wait for it."""
    home.mkdir(parents=True, exist_ok=True)
    with _start_lock(home):
        if running := status(home):
            return running
        state = _state(home).read()
        process = None
        if state is not None and lifecycle.runs(state["pid"], SERVER.encode()):
            pid = state["pid"]  # warming up
        else:
            socket_path(home).unlink(missing_ok=True)
            process = lifecycle.launch([sys.executable, "-m", SERVER, str(home)], log_path(home))
            pid = process.pid
            _state(home).write({"pid": pid})

    def died() -> str | None:
        if process is not None and process.poll() is None \
                or process is None and lifecycle.runs(pid, SERVER.encode()):
            return None
        _state(home).remove()
        code = f" with {process.returncode}" if process is not None else ""
        return (f"the engine exited{code} while starting: "
                f"{tail(log_path(home), 1)} (its log: {log_path(home)})")

    def timed_out() -> str:
        stop(home)
        return f"the engine did not start in {timeout:.0f}s; see {log_path(home)}"

    found: list[EngineInfo] = []

    def ready() -> bool:
        running = status(home)
        found.extend([running] if running else [])
        return running is not None

    lifecycle.wait_ready(ready, died, timeout, timed_out, EngineError, poll=0.5)
    return found[-1]


@contextmanager
def _start_lock(home: Path) -> Iterator[None]:
    """Held while a start looks for an engine and launches one (an advisory lock of the
    home's `engine.lock`, released when the start's process ends, however it ends)."""
    with (home / "engine.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def stop(home: Path = ENGINE_DIR, timeout: float = 60) -> bool:
    """Stop the running engine; whether there was one."""
    state = _state(home).read()
    if state is None:
        return False
    # The engine stops its session itself, so SIGTERM to it alone.
    alive = lifecycle.stop_process(state["pid"], timeout, group=False)
    _state(home).remove()
    socket_path(home).unlink(missing_ok=True)
    return alive


def tail(log: Path, lines: int = 5) -> str:
    """The last lines of the engine's log, joined, for a one-line error."""
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return f"no log at {log}"
