"""The resident engine: a process that keeps one warm Spark session and runs the commands of
`exactly-once` processes in it, one at a time.

A new JVM's first pipeline update costs about three warm ones: the JIT compiling, every Spark,
Delta and RocksDB path used for the first time (BENCHMARKS.md, issue 25). `exactly-once engine
start` starts this process; it builds the session, warms it with two small updates of a
scratch warehouse (`train_jvm.training_updates`), then listens on a Unix socket in
ENGINE_DIR. While it runs, an `exactly-once` process that is asked a command using Spark
(`SPARK_COMMANDS`) sends it there: the command line, the working directory and the
environment; the engine runs it as the process would have (`cli.main`, in its session), sends
back what it prints as it prints it, then its exit code. Ctrl-C in the process reaches the
command as Ctrl-C. A command that needs a session of its own (a `spark://` master, a
warehouse on an object store) runs in its process as before, and `EXACTLY_ONCE_ENGINE=off`
keeps every command in its process.

Between commands the engine puts its session back as it was: settings, cached tables, no
query left running. Python code is loaded once: after changing the project's modules, restart
the engine (pipeline files and conf/ are read by each command, as always).

Protocol, one JSON object per line. The process sends {"argv", "cwd", "env"}, then
{"signal": "INT"} on Ctrl-C; the engine sends {"out": text} and {"err": text}, then
{"exit": code}.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from exactly_once.errors import EngineError
from exactly_once.paths import ENGINE_DIR
from exactly_once.processes import pid_alive, terminate

SPARK_COMMANDS = frozenset({"run", "dry-run", "graph", "show", "events", "explain", "quality"})
OFF = "off"  # EXACTLY_ONCE_ENGINE=off: every command in its own process
WARM_UPDATES = 2
_serving = False  # in the engine itself: its commands are never sent on
# Not `python -m exactly_once.cli.resident`: the package imports this module first, and the
# engine would run in a second copy of it (`__main__`) whose `_serving` nobody reads.
_SERVE = ("import sys; from pathlib import Path; from exactly_once.cli import resident; "
          "resident.serve(Path(sys.argv[1]))")


@dataclass(frozen=True)
class EngineInfo:
    pid: int
    socket: Path
    log: Path


def _socket(home: Path) -> Path:
    return home / "engine.sock"


def _pid_file(home: Path) -> Path:
    return home / "engine.pid"


def _log(home: Path) -> Path:
    return home / "engine.log"


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def status(home: Path = ENGINE_DIR) -> EngineInfo | None:
    """The running engine of `home`, or None."""
    try:
        pid = int(_pid_file(home).read_text())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid) or not _answers(_socket(home)):
        return None
    return EngineInfo(pid, _socket(home), _log(home))


def start(home: Path = ENGINE_DIR, timeout: float = 600) -> EngineInfo:
    """Start the engine (or find it running); returns once it is warm and listening."""
    if running := status(home):
        return running
    home.mkdir(parents=True, exist_ok=True)
    _socket(home).unlink(missing_ok=True)
    with _log(home).open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(home)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    _pid_file(home).write_text(str(process.pid))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running := status(home):
            return running
        if process.poll() is not None:
            _pid_file(home).unlink(missing_ok=True)
            raise EngineError(f"the engine exited with {process.returncode} while starting: "
                              f"{_tail(_log(home), 1)} (its log: {_log(home)})")
        time.sleep(0.5)
    stop(home)
    raise EngineError(f"the engine did not start in {timeout:.0f}s; see {_log(home)}")


def stop(home: Path = ENGINE_DIR, timeout: float = 60) -> bool:
    """Stop the running engine; whether there was one."""
    try:
        pid = int(_pid_file(home).read_text())
    except (OSError, ValueError):
        return False
    alive = pid_alive(pid)
    if alive:  # the engine stops its session itself, so SIGTERM to it alone
        terminate(pid, timeout, group=False)
    _pid_file(home).unlink(missing_ok=True)
    _socket(home).unlink(missing_ok=True)
    return alive


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return f"no log at {log}"


# -- the process's side ------------------------------------------------------------------------
def serves(args: argparse.Namespace, home: Path = ENGINE_DIR) -> bool:
    """Whether this command goes to a running engine: it uses Spark in `local[N]` on a local
    warehouse, the engine runs, and nobody said `EXACTLY_ONCE_ENGINE=off`."""
    if _serving or os.environ.get("EXACTLY_ONCE_ENGINE", "").lower() == OFF:
        return False
    if args.command not in SPARK_COMMANDS or getattr(args, "master", None):
        return False
    if str(getattr(args, "warehouse", "") or "").startswith("s3a://"):
        return False
    from exactly_once.settings.engine import load_engine

    if not load_engine(args.target).master.startswith("local"):
        return False
    return status(home) is not None


def forward(argv: list[str], home: Path = ENGINE_DIR) -> int:
    """Run `argv` in the engine; its output on this process's, its exit code returned."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(_socket(home)))
    except OSError as err:
        raise EngineError(f"the engine at {_socket(home)} does not answer: {err}") from err
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
    raise EngineError(f"the engine ended during the command; {_tail(_log(home))}")


# -- the engine's side ---------------------------------------------------------------------------
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
    """The command's working directory, environment and output, for the block."""
    cwd, env = os.getcwd(), dict(os.environ)
    os.chdir(request["cwd"])
    os.environ.update(request["env"])
    try:
        with contextlib.redirect_stdout(_Sender(channel, "out")), \
                contextlib.redirect_stderr(_Sender(channel, "err")):
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
    global _serving
    from exactly_once.local.engine import session
    from exactly_once.local.execution.train_jvm import training_updates

    _serving = True
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
        path = _socket(home)
        path.unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(str(path))
            server.listen(16)
            print(f"engine listening on {path}", flush=True)
            while True:
                conn, _ = server.accept()
                _run_command(conn, spark, baseline)
    finally:
        _socket(home).unlink(missing_ok=True)
        session.SparkSession.stop(spark)

