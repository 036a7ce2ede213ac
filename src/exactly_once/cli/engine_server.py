"""The resident engine's server: keeps one warm Spark session and runs the commands that
`exactly-once` processes send it (cli/engine_client.py), one at a time. Started by
`exactly-once engine start` (services/engine.py) as `python -m exactly_once.cli.engine_server
HOME`.

A new JVM's first pipeline update costs about three warm ones: the JIT compiling, every Spark,
Delta and RocksDB path used for the first time (BENCHMARKS.md, issue 25). The server builds
the session, warms it with two small updates of a scratch warehouse
(`train_jvm.training_updates`), then listens on a Unix socket in its home. It runs each command
as the process would have (`cli.main`, in its session), in the process's working directory and
environment, and streams back what the command prints as it prints it, then its exit code.

Between commands the engine puts its session back as it was: settings, cached tables, no
query left running. Python code is loaded once: after changing the project's modules, restart
the engine (pipeline files and conf/ are read by each command, as always).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from exactly_once.cli.engine_client import ENGINE_VARIABLE, OFF
from exactly_once.services import engine

WARM_UPDATES = 2


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


class _Channel:
    """The connection's messages to the process, one JSON line each. Threads take turns; a
    message sent while this thread is inside a send (a signal handler's write) goes right
    after it, never inside its line."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.RLock()
        self._pending: list[dict[str, str | int]] = []
        self._sending = False

    def send(self, kind: str, value: str | int) -> None:
        with self._lock:
            self._pending.append({kind: value})
            if self._sending:  # this thread, interrupted inside its own send
                return
            self._sending = True
            try:
                while self._pending:
                    line = json.dumps(self._pending.pop(0)) + "\n"
                    with contextlib.suppress(OSError):  # a process gone: its output too
                        self._sock.sendall(line.encode())
            finally:
                self._sending = False


class _Sender(io.TextIOBase):
    """A text stream whose writes go to the process as `{kind: text}` messages."""

    def __init__(self, channel: _Channel, kind: str) -> None:
        self._channel, self._kind = channel, kind

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            self._channel.send(self._kind, text)
        return len(text)


@contextlib.contextmanager
def _as_the_process(request: dict[str, Any], channel: _Channel) -> Iterator[None]:
    """The command's working directory, environment and output, for the block; the folders of
    its PYTHONPATH on `sys.path` before the engine's own, as the process's Python has them
    (what is imported from them is forgotten after: the next command reads an edited module)."""
    from exactly_once.local.graph.loader import importable

    cwd, env = os.getcwd(), dict(os.environ)
    os.chdir(request["cwd"])
    os.environ.update(request["env"])
    os.environ[ENGINE_VARIABLE] = OFF  # the engine runs the command itself, never sends it on
    folders = [f for f in request["env"].get("PYTHONPATH", "").split(os.pathsep) if f]
    try:
        with contextlib.ExitStack() as path, \
                contextlib.redirect_stdout(_Sender(channel, "out")), \
                contextlib.redirect_stderr(_Sender(channel, "err")):
            for folder in reversed(folders):  # each goes first: the first ends up first
                path.enter_context(importable(Path(folder)))
            yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)


def _interrupts(incoming: TextIO, done: threading.Event) -> None:
    """Ctrl-C from the process (or the process gone) as SIGINT to the engine's main thread,
    where the command runs: the same as Ctrl-C in a process of its own."""
    for line in incoming:
        if json.loads(line).get("signal") == "INT":
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
    if not done.is_set():
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def _reset_session(spark: Any, baseline: dict[str, str]) -> None:
    """The session as it was before the command: its settings, no cache, no query running."""
    for query in spark.streams.active:
        query.stop()
    spark.catalog.clearCache()
    for key, value in spark.conf.getAll.items():
        with contextlib.suppress(Exception):  # static settings cannot change, nor did they
            if key not in baseline:
                spark.conf.unset(key)
            elif value != baseline[key]:
                spark.conf.set(key, baseline[key])


def _run_command(conn: socket.socket, spark: Any, baseline: dict[str, str]) -> None:
    from exactly_once import cli

    done = threading.Event()
    with conn, conn.makefile("r", encoding="utf-8") as incoming:
        line = incoming.readline()
        if not line:
            return
        request = json.loads(line)
        threading.Thread(target=_interrupts, args=(incoming, done), daemon=True).start()
        channel, code = _Channel(conn), 1
        try:
            with _as_the_process(request, channel):
                try:
                    code = cli.main(request["argv"])
                except KeyboardInterrupt:
                    code = 130
                except Exception as err:  # noqa: BLE001 - the command's, not the engine's end
                    print(f"exactly-once: error: {type(err).__name__}: {err}", file=sys.stderr)
        finally:
            done.set()
            _reset_session(spark, baseline)
        channel.send("exit", code)


def serve(home: Path) -> None:
    """Build and warm the session, then run commands until SIGTERM."""
    from exactly_once.local.engine import session
    from exactly_once.local.execution.train_jvm import training_updates

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        spark = session.build_session(home / "scratch", log_level="OFF")
    except Exception as err:  # noqa: BLE001 - one line for `engine start` to report
        print(f"the Spark session did not start: {_one_line(err)}", flush=True)
        sys.exit(1)
    try:
        with tempfile.TemporaryDirectory(prefix="engine-warm-up-") as scratch:
            training_updates(spark, Path(scratch), WARM_UPDATES)
        baseline = dict(spark.conf.getAll.items())
        session.keep_resident(spark)
        path = engine.socket_path(home)
        path.unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(str(path))
            server.listen(16)
            print(f"engine listening on {path}", flush=True)
            while True:
                conn, _ = server.accept()
                _run_command(conn, spark, baseline)
    finally:
        engine.socket_path(home).unlink(missing_ok=True)
        session.SparkSession.stop(spark)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
