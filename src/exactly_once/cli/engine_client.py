"""The client side of the resident engine (services/engine.py): an `exactly-once` process that
is asked a command using Spark (`SPARK_COMMANDS`) sends it to the running engine, which runs it
in its warm session (cli/engine_server.py) and sends back what it prints, then its exit code.

A command that needs a session of its own (a `spark://` master, a warehouse on an object store)
runs in its process as before, and `EXACTLY_ONCE_ENGINE=off` keeps every command in its
process. Ctrl-C in the process reaches the command as Ctrl-C.

Protocol, one JSON object per line. The process sends {"argv", "cwd", "env"}, then
{"signal": "INT"} on Ctrl-C; the engine sends {"out": text} and {"err": text}, then
{"exit": code}.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from exactly_once.errors import EngineError
from exactly_once.paths import ENGINE_DIR
from exactly_once.services import engine

SPARK_COMMANDS = frozenset({"run", "rederive", "dry-run", "graph", "show", "events", "explain",
                            "quality", "test"})
ENGINE_VARIABLE = "EXACTLY_ONCE_ENGINE"
OFF = "off"  # EXACTLY_ONCE_ENGINE=off: every command in its own process (the engine's own too)


def serves(args: argparse.Namespace, home: Path = ENGINE_DIR) -> bool:
    """Whether this command goes to a running engine: it uses Spark in `local[N]` on a local
    warehouse, the engine runs, and nobody said `EXACTLY_ONCE_ENGINE=off`."""
    if os.environ.get(ENGINE_VARIABLE, "").lower() == OFF:
        return False
    if args.command not in SPARK_COMMANDS or getattr(args, "master", None):
        return False
    if str(getattr(args, "warehouse", "") or "").startswith("s3a://"):
        return False
    if engine.status(home) is None:
        return False
    if args.command == "test":  # pytest's own session: no master of its own
        return True
    from exactly_once.cli import common

    return common.engine_of(args).master.startswith("local")


def forward(argv: list[str], home: Path = ENGINE_DIR) -> int:
    """Run `argv` in the engine; its output on this process's, its exit code returned."""
    path = engine.socket_path(home)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError as err:
        raise EngineError(f"the engine at {path} does not answer: {err}") from err
    with sock, sock.makefile("r", encoding="utf-8") as incoming:
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
        sock.sendall((json.dumps(request) + "\n").encode())

        def interrupt(signum: int, frame: Any) -> None:
            sock.sendall(b'{"signal": "INT"}\n')

        previous = signal.signal(signal.SIGINT, interrupt)
        try:
            for line in incoming:
                message = json.loads(line)
                if "exit" in message:
                    return int(message["exit"])
                stream = sys.stdout if "out" in message else sys.stderr
                stream.write(message.get("out", message.get("err", "")))
                stream.flush()
        finally:
            signal.signal(signal.SIGINT, previous)
    raise EngineError(f"the engine ended during the command; {engine.tail(engine.log_path(home))}")
