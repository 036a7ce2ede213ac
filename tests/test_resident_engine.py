"""The resident engine (services/engine.py, cli/engine_client.py, cli/engine_server.py):
`exactly-once` processes run their Spark commands in its warm session, with their own output,
exit code, working directory and Ctrl-C; commands that need a session of their own stay in
their process. One engine for the module."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.paths import PROJECT_ROOT


def env_of(home: Path, **more: str) -> dict[str, str]:
    env = os.environ | {"EXACTLY_ONCE_HOME": str(home)}
    env.pop("EXACTLY_ONCE_ENGINE", None)  # the suite keeps its own commands in-process
    return env | more


def cli(home: Path, *args: str, cwd: Path | None = None, timeout: float = 300,
        **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exactly_once.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=env_of(home, **env))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    home = tmp_path_factory.mktemp("engine-home")
    started = cli(home, "engine", "start", timeout=900)
    assert started.returncode == 0, started.stdout + started.stderr
    assert "Engine running (pid " in started.stdout
    yield home
    stopped = cli(home, "engine", "stop")
    assert stopped.stdout.strip() == "Engine stopped", stopped.stdout + stopped.stderr


def dumps_in(directory: Path, *days: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for day in days:
        write_kcat_jsonl(directory / f"stream-{day}.jsonl", generate_stream(GeneratorConfig(
            events=40, orders=8, players=4, seed=day,
            start=datetime(2026, 11, day, tzinfo=timezone.utc))))
    return directory


def test_a_command_runs_in_the_engine_s_session_from_the_process_s_directory(engine, tmp_path):
    """No JVM can start in the process (JAVA_HOME names nothing), so the update ran in the
    engine; relative paths are the process's."""
    dumps_in(tmp_path / "dumps", 3)
    run = cli(engine, "run", "--bundle", str(PROJECT_ROOT), "--source", "file:dumps",
              "--warehouse", "lake", cwd=tmp_path, JAVA_HOME="/nonexistent")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Update finished in " in run.stdout
    assert f"Delta tables in {(tmp_path / 'lake').resolve()}" in run.stdout
    assert (tmp_path / "lake" / "orders" / "_delta_log").is_dir()
    shown = cli(engine, "show", "orders", "--warehouse", str(tmp_path / "lake"),
                JAVA_HOME="/nonexistent")
    assert shown.returncode == 0 and "order_id" in shown.stdout, shown.stdout + shown.stderr
    # The same command in its own process needs a JVM: EXACTLY_ONCE_ENGINE=off keeps it there.
    alone = cli(engine, "show", "orders", "--warehouse", str(tmp_path / "lake"),
                JAVA_HOME="/nonexistent", EXACTLY_ONCE_ENGINE="off")
    assert alone.returncode != 0


def test_an_error_is_the_command_s_own_line_and_exit_code(engine, tmp_path):
    shown = cli(engine, "show", "no_such_table", "--warehouse", str(tmp_path / "empty"))
    assert shown.returncode == 1
    assert shown.stderr.startswith("exactly-once: error: ") and shown.stderr.count("\n") == 1
    assert "Traceback" not in shown.stderr


def test_ctrl_c_stops_the_command_and_the_engine_serves_the_next(engine, tmp_path):
    """SIGINT to the process reaches the command as Ctrl-C; the engine's session is left with
    no query running and takes the next command."""
    dumps = dumps_in(tmp_path / "dumps", 5)
    process = subprocess.Popen(
        [sys.executable, "-m", "exactly_once.cli", "run", "--continuous", "--trigger-interval",
         "1 second", "--source", f"file:{dumps}", "--warehouse", str(tmp_path / "lake")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_of(engine))
    assert process.stdout is not None
    first = process.stdout.readline()  # the first update's line: the command is running
    assert first.startswith("update ") and " finished in " in first, first
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, out + err
    assert "Continuous run stopped (SIGINT) after " in out, out
    # What the signal's handler prints at once is the process's too, not the engine's log.
    assert "SIGINT: " in err and "(again to stop at once)" in err, err
    again = cli(engine, "run", "--source", f"file:{dumps}", "--warehouse",
                str(tmp_path / "lake"))
    assert again.returncode == 0, again.stdout + again.stderr


def test_commands_that_need_their_own_session_stay_in_their_process(engine):
    from exactly_once.cli import build_parser, engine_client
    from exactly_once.paths import ENGINE_DIR

    home = engine / "engine"
    assert ENGINE_DIR != home  # this process's default engine is not the test's
    parse = build_parser().parse_args
    saved = os.environ.pop("EXACTLY_ONCE_ENGINE", None)
    try:
        assert engine_client.serves(parse(["show", "orders"]), home)
        assert not engine_client.serves(parse(["run", "--master", "spark://127.0.0.1:7077"]), home)
        assert not engine_client.serves(parse(["run", "--warehouse", "s3a://lake/w"]), home)
        assert not engine_client.serves(parse(["generate", "--events", "5"]), home)
        os.environ["EXACTLY_ONCE_ENGINE"] = "off"
        assert not engine_client.serves(parse(["show", "orders"]), home)
    finally:
        os.environ.pop("EXACTLY_ONCE_ENGINE", None)
        if saved is not None:
            os.environ["EXACTLY_ONCE_ENGINE"] = saved


def test_status_and_a_second_start(engine):
    status = cli(engine, "engine", "status")
    assert status.returncode == 0 and status.stdout.startswith("Engine running (pid ")
    pid = status.stdout.split("pid ")[1].split(",")[0]
    again = cli(engine, "engine", "start")  # the running one, not a second
    assert again.returncode == 0 and f"pid {pid}," in again.stdout


def test_a_write_from_inside_a_send_follows_its_line():
    """A signal handler that prints while the command's thread is inside a send (Python runs
    handlers between the steps of a send it retries) gets its own line, after that one."""
    from exactly_once.cli.engine_server import _Channel

    class Socket:
        def __init__(self) -> None:
            self.sent: list[bytes] = []

        def sendall(self, data: bytes) -> None:
            if not self.sent and data.startswith(b'{"out"'):
                channel.send("err", "SIGINT: stopping\n")  # the handler, mid-send
            self.sent.append(data)

    sock = Socket()
    channel = _Channel(sock)  # type: ignore[arg-type]
    channel.send("out", "update 1 finished\n")
    assert sock.sent == [b'{"out": "update 1 finished\\n"}\n', b'{"err": "SIGINT: stopping\\n"}\n']


def test_a_bundle_s_pytest_runs_in_the_engine(engine, tmp_path):
    """A plain `pytest` in a bundle's folder goes to the running engine (the pytest plugin): no
    JVM can start in the process (JAVA_HOME names nothing), yet the bundle's tests run their
    updates; a second run reads an edited test anew."""
    bundle = tmp_path / "tested_taxis"
    shutil.copytree(PROJECT_ROOT / "tests" / "bundles" / "tested_taxis", bundle)
    tests = bundle / "tests" / "test_taxis.py"
    tests.write_text(tests.read_text().split("\n\ndef test_rides_arrive")[0] + "\n")
    # A module on the process's PYTHONPATH (as `PYTHONPATH=src pytest` puts a project's
    # package there) is importable in the engine too, as it is in the process's own Python.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "fares_helper.py").write_text("MINIMUM = 2.5\n")
    (bundle / "tests" / "test_helper.py").write_text(
        "from fares_helper import MINIMUM\n\n\ndef test_helper():\n    assert MINIMUM == 2.5\n")
    env = env_of(engine, JAVA_HOME="/nonexistent", PYTHONPATH=os.pathsep.join(
        filter(None, ["../lib", os.environ.get("PYTHONPATH")])))
    env.pop("PYTEST_XDIST_WORKER", None)
    first = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                           cwd=bundle, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "4 passed" in first.stdout, first.stdout
    tests.write_text(tests.read_text().replace('"total_fare": 12.5', '"total_fare": 13.0'))
    second = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_taxis.py"], cwd=bundle, env=env, capture_output=True,
                            text=True, timeout=600)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "missing | 10103      | 2     | 13.0" in second.stdout, second.stdout


# A stand-in for cli/engine_server: its pid recorded at launch, then a warm-up, then the socket.
WARMING_SERVER = """
import os, socket, sys, time
from pathlib import Path

home = Path(sys.argv[1])
with open(home / "launched", "a") as log:
    log.write(f"{os.getpid()}\\n")
time.sleep(2)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(str(home / "engine.sock"))
server.listen()
while True:
    server.accept()[0].close()
"""


def test_starts_while_an_engine_warms_up_wait_for_it(tmp_path, monkeypatch):
    """Three `engine start`s at once, the engine still warming when the later ones look: one
    engine is launched, and each start answers with it."""
    from concurrent.futures import ThreadPoolExecutor

    from exactly_once.services import engine, lifecycle

    (tmp_path / "fake_engine_server.py").write_text(WARMING_SERVER)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(engine, "SERVER", "fake_engine_server")
    home = tmp_path / "home"
    try:
        with ThreadPoolExecutor(3) as pool:
            started = list(pool.map(lambda _: engine.start(home, timeout=30), range(3)))
        launched = (home / "launched").read_text().split()
        assert len(launched) == 1, launched
        assert {info.pid for info in started} == {int(launched[0])}
    finally:  # every stand-in launched, the engine's and any other
        engine.stop(home)
        for pid in (home / "launched").read_text().split():
            lifecycle.stop_process(int(pid), 5, b"fake_engine_server", group=False)
