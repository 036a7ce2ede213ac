"""The local processes the project starts (the Kafka broker, the Spark cluster's daemons, the S3
server, the resident engine): whether one is alive, its exit collected, its end, and free ports
on loopback for them."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

HOST = "127.0.0.1"


def pid_alive(pid: int) -> bool:
    """True for a live, non-zombie process (a zombie still answers kill(pid, 0))."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def reap(pid: int) -> None:
    """Collects the exit status if the process is our own child, so it leaves no zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def terminate(pid: int, timeout: float, group: bool = True) -> None:
    """SIGTERM `pid`'s process group (only `pid` when not `group`: a leader that ends its
    children itself), then SIGKILL the group if it outlives `timeout`; returns once it is gone,
    or 10 s after the SIGKILL."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            if group or sig == signal.SIGKILL:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            reap(pid)
            if not pid_alive(pid):
                return
            time.sleep(0.2)


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port the OS considers free right now (small race window, fine for local use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])
