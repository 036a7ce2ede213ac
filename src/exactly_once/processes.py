"""The local processes the project starts (the Kafka broker, the Spark cluster's daemons, the S3
server): whether one is alive, its exit collected, and free ports on loopback for them."""

from __future__ import annotations

import os
import socket
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
