"""The one lifecycle of a local service: a detached process, its state file, its log, its
readiness, its end.

Each service (the Kafka broker, the Spark cluster's daemons, the S3 server, the resident
engine) runs detached from the command that started it, in a process group of its own, so
`start`, `status` and `stop` can be different commands. What they share is here; each service
module declares only what differs: its command line, how to tell its process from another that
got the same pid, its readiness probe, what its state file holds and its messages.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly_once.errors import ExactlyOnceError
from exactly_once.services.processes import HOST, pid_alive, terminate


@dataclass(frozen=True)
class StateFile:
    """A running service's pid(s) and ports, as JSON in its home (the pid file)."""

    path: Path

    def read(self) -> dict[str, Any] | None:
        """The recorded state, or None when there is none (or it is unreadable)."""
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def write(self, state: Mapping[str, Any]) -> None:
        self.path.write_text(json.dumps(state))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def launch(command: Sequence[str], log: Path, *, cwd: Path | None = None,
           env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `command` detached (a session and process group of its own, no stdin), its output
    appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd,
                                env=None if env is None else dict(env))


def command_line(pid: int) -> bytes:
    """The process's command line (NUL-separated), b"" when it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def runs(pid: int, *markers: bytes) -> bool:
    """Whether `pid` is a live process whose command line holds every marker: the guard
    against a pid the system gave to another process since the state file was written."""
    cmdline = command_line(pid)
    return pid_alive(pid) and all(marker in cmdline for marker in markers)


def wait_ready(ready: Callable[[], bool], died: Callable[[], str | None], timeout: float,
               timed_out: Callable[[], str], error: type[ExactlyOnceError],
               poll: float = 0.3) -> None:
    """Return once `ready()`; raise `error` with `died()`'s message as soon as it has one (the
    service exited while starting), or with `timed_out()`'s after `timeout` seconds. Stopping
    what did start is the caller's: it knows what that is."""
    deadline = time.monotonic() + timeout
    while True:
        if (why := died()) is not None:
            raise error(why)
        if ready():
            return
        if time.monotonic() > deadline:
            raise error(timed_out())
        time.sleep(poll)


def stop_process(pid: int, timeout: float, *markers: bytes, group: bool = True) -> bool:
    """End the service's process (its group, unless not `group`) if it is still the service's:
    SIGTERM, then SIGKILL what outlives `timeout`. Whether it was running."""
    if not runs(pid, *markers):
        return False
    terminate(pid, timeout, group=group)
    return True


def port_answers(port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on `port` of the loopback address."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_lines(*logs: Path) -> list[str]:
    """The lines of the service's logs that exist, in order."""
    lines: list[str] = []
    for log in logs:
        try:
            lines += log.read_text(errors="replace").splitlines()
        except OSError:
            continue
    return lines


def log_tail(logs: Sequence[Path], count: int, is_error: Callable[[str], bool]) -> list[str]:
    """What a person needs to see why a service failed: the logs' last `count` error lines,
    else their last `count` lines."""
    lines = log_lines(*logs)
    return ([line for line in lines if is_error(line)] or lines)[-count:]
