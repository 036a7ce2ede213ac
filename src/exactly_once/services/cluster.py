"""A Spark standalone cluster on this machine: one master and N one-core workers on 127.0.0.1.

Spark's own cluster manager, started from the pyspark wheel (`bin/spark-class` with
`org.apache.spark.deploy.master.Master` and `...worker.Worker`), as a self-managed Spark shop
runs it; `exactly-once run --master spark://127.0.0.1:PORT` then runs an update on it. Each
daemon runs detached in a process group of its own (its executors are its children), so
`start`, `status` and `stop` can be different commands. Everything lives under one home:

    home/cluster.json       pids and ports of the running cluster (the pid file)
    home/logs/<daemon>.out  each daemon's stdout and stderr
    home/work/<worker>/     each worker's work dir (its executors' stdout, stderr, files)
    home/scratch/           the executors' scratch space (shuffle and spill files)

Readiness is the master's JSON status page (`http://127.0.0.1:<ui port>/json/`): the master
ALIVE with every worker registered ALIVE. A port in use, a daemon that dies while starting, or
a worker dead afterwards is a `ClusterError` of one line.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

from exactly_once.errors import ClusterError
from exactly_once.services import lifecycle
from exactly_once.services.processes import HOST, free_port, pid_alive, port_free, reap

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DEFAULT_PORT = 7077
DEFAULT_WORKERS = 2
WORKER_MEMORY = "2g"  # what each worker offers its executors
DAEMON_MEMORY = "512m"  # the master's and each worker's own heap


@dataclass(frozen=True)
class Daemon:
    name: str  # `master`, `worker-1`, ...
    pid: int


@dataclass(frozen=True)
class ClusterInfo:
    home: Path
    port: int
    ui_port: int
    master: Daemon
    workers: tuple[Daemon, ...]

    @property
    def url(self) -> str:
        """What `--master` takes."""
        return f"spark://{HOST}:{self.port}"

    @property
    def ui(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    def daemons(self) -> tuple[Daemon, ...]:
        return (self.master, *self.workers)


def _state(home: Path) -> lifecycle.StateFile:
    return lifecycle.StateFile(home / "cluster.json")


def log_file(home: Path, daemon: str) -> Path:
    return home / "logs" / f"{daemon}.out"


def _markers(home: Path) -> tuple[bytes, ...]:
    """What a daemon of `home`'s command line holds: the guard against pid reuse."""
    return b"org.apache.spark.deploy.", str(home).encode()


def _is_ours(pid: int, home: Path) -> bool:
    return lifecycle.runs(pid, *_markers(home))


def processes_of(home: Path) -> list[int]:
    """Every process on this machine whose command line names `home`: the daemons and the
    executors they started (an executor's work dir is under `home/work`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(home).encode() in cmdline and pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def _info(home: Path, state: dict[str, Any]) -> ClusterInfo:
    return ClusterInfo(home, int(state["port"]), int(state["ui_port"]),
                       Daemon("master", int(state["master"])),
                       tuple(Daemon(f"worker-{i}", int(pid))
                             for i, pid in enumerate(state["workers"], 1)))


def master_status(ui: str, timeout: float = 2) -> dict[str, Any] | None:
    """The master's JSON status page (`/json/`): its state and its workers'; None when it
    does not answer."""
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=timeout) as answer:
            status: dict[str, Any] = json.load(answer)
            return status
    except (OSError, ValueError):
        return None


def alive_workers(status: dict[str, Any]) -> int:
    return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")


def status(home: Path) -> ClusterInfo | None:
    """The cluster running from `home`, or None when its master is not running (stale state
    is ignored). A dead worker is `check`'s to report."""
    home = Path(home).resolve()
    state = _state(home).read()
    if state is None:
        return None
    info = _info(home, state)
    if not _is_ours(info.master.pid, home):
        return None
    return info


def check(info: ClusterInfo) -> None:
    """ClusterError naming the first daemon of `info` that is not running, or the workers the
    master does not count as alive."""
    for daemon in info.daemons():
        if not _is_ours(daemon.pid, info.home):
            raise ClusterError(f"{daemon.name} (pid {daemon.pid}) of the cluster at {info.url} "
                               f"is not running; see {log_file(info.home, daemon.name)}, then "
                               "`exactly-once cluster stop` and `cluster start`")
    answer = master_status(info.ui)
    if answer is None:
        raise ClusterError(f"the master at {info.url} does not answer on {info.ui}/json/")
    if alive_workers(answer) < len(info.workers):
        raise ClusterError(f"the master at {info.url} has {alive_workers(answer)} of "
                           f"{len(info.workers)} workers alive")


def _spark_class(main: str, *args: str) -> list[str]:
    return [str(SPARK_HOME / "bin" / "spark-class"), main, *args]


def _environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SPARK_", "PYSPARK_"))}
    return env | {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        # Executors keep shuffle and spill files here, not in /tmp.
        "SPARK_LOCAL_DIRS": str(home / "scratch"),
        "SPARK_LOCAL_IP": HOST,
    }


def _launch(home: Path, daemon: str, command: list[str]) -> int:
    return lifecycle.launch(command, log_file(home, daemon), cwd=home,
                            env=_environment(home)).pid


def _log_tail(home: Path, daemon: str, lines: int = 3) -> str:
    """The daemon's error lines, else its last lines: what a person needs to see why."""
    if not log_file(home, daemon).exists():
        return "(no log)"
    tail = lifecycle.log_tail([log_file(home, daemon)], lines,
                              lambda line: " ERROR " in line or "Exception" in line)
    return " | ".join(line.strip() for line in tail) or "(no log output)"


def start(home: Path, port: int = DEFAULT_PORT, workers: int = DEFAULT_WORKERS,
          worker_memory: str = WORKER_MEMORY, ui_port: int | None = None,
          timeout: float = 120) -> ClusterInfo:
    """Start the master on `port` and `workers` one-core workers, and wait until the master
    lists them all ALIVE. A cluster already running from `home` is returned as it is (started
    twice is harmless), with any worker that died started again; on another port it is an
    error."""
    home = Path(home).resolve()
    running = status(home)
    if running is not None:
        if running.port != port:
            raise ClusterError(f"the cluster in {home} is already running at {running.url}")
        running = _restart_dead_workers(running, worker_memory)
        _wait_ready(running, timeout)
        return running
    for daemon in (_info(home, state).daemons() if (state := _state(home).read()) else ()):
        _stop_daemon(daemon, home)  # workers of a master that died: start afresh
    ui_port = ui_port or free_port()
    for wanted, what in ((port, "master"), (ui_port, "master web UI")):
        if not port_free(wanted):
            raise ClusterError(f"port {wanted} ({what}) is already in use by another process")
    for directory in ("logs", "work", "scratch"):
        (home / directory).mkdir(parents=True, exist_ok=True)
    master = _launch(home, "master", _spark_class(
        MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", str(ui_port),
        "--properties-file", str(_properties(home))))
    pids = [_launch_worker(home, i, port, worker_memory) for i in range(1, workers + 1)]
    info = ClusterInfo(home, port, ui_port, Daemon("master", master),
                       tuple(Daemon(f"worker-{i}", pid) for i, pid in enumerate(pids, 1)))
    _write_state(info)
    try:
        _wait_ready(info, timeout)
    except ClusterError:
        stop(home)
        raise
    return info


def _launch_worker(home: Path, index: int, port: int, memory: str) -> int:
    return _launch(home, f"worker-{index}", _spark_class(
        WORKER_CLASS, "--host", HOST, "--port", "0", "--webui-port", "0", "--cores", "1",
        "--memory", memory, "--work-dir", str(home / "work" / f"worker-{index}"),
        "--properties-file", str(_properties(home)), f"spark://{HOST}:{port}"))


def _write_state(info: ClusterInfo) -> None:
    _state(info.home).write({"port": info.port, "ui_port": info.ui_port, "master": info.master.pid,
                             "workers": [worker.pid for worker in info.workers]})


def _restart_dead_workers(info: ClusterInfo, memory: str) -> ClusterInfo:
    workers = []
    for index, worker in enumerate(info.workers, 1):
        reap(worker.pid)
        if not _is_ours(worker.pid, info.home):
            worker = Daemon(worker.name, _launch_worker(info.home, index, info.port, memory))
        workers.append(worker)
    restarted = ClusterInfo(info.home, info.port, info.ui_port, info.master, tuple(workers))
    if restarted != info:
        _write_state(restarted)
    return restarted


def _properties(home: Path) -> Path:
    """The daemons' Spark properties: the web UIs on loopback, finished executors' work dirs
    cleaned up, a worker lost within 15 s (its tasks re-run elsewhere) instead of 60."""
    path = home / "spark-defaults.conf"
    path.write_text("".join(f"{key} {value}\n" for key, value in {
        "spark.ui.reverseProxy": "false",
        "spark.worker.cleanup.enabled": "true",
        "spark.worker.timeout": "15",
    }.items()))
    return path


def _wait_ready(info: ClusterInfo, timeout: float) -> None:
    def died() -> str | None:
        for daemon in info.daemons():
            reap(daemon.pid)
            if not pid_alive(daemon.pid):
                return (f"{daemon.name} of the cluster exited while starting: "
                        f"{_log_tail(info.home, daemon.name)}")
        return None

    def ready() -> bool:
        answer = master_status(info.ui)
        return answer is not None and answer.get("status") == "ALIVE" \
            and alive_workers(answer) >= len(info.workers)

    lifecycle.wait_ready(ready, died, timeout, lambda: (
        f"the cluster at {info.url} did not become ready: "
        f"{alive_workers(master_status(info.ui) or {})} of {len(info.workers)} workers "
        f"registered; see {info.home / 'logs'}"), ClusterError)


def _stop_daemon(daemon: Daemon, home: Path, timeout: float = 20) -> None:
    """SIGTERM the daemon's process group (it and its executors), SIGKILL what outlives it."""
    lifecycle.stop_process(daemon.pid, timeout, *_markers(home))


def stop(home: Path) -> bool:
    """Stop the cluster of `home` (workers first, then the master); False if none ran."""
    home = Path(home).resolve()
    state = _state(home).read()
    _state(home).remove()
    if state is None:
        return False
    info = _info(home, state)
    was_running = _is_ours(info.master.pid, home)
    for daemon in (*info.workers, info.master):
        _stop_daemon(daemon, home)
    return was_running


def kill_worker(info: ClusterInfo, index: int) -> int:
    """SIGKILL worker `index` (1-based) and its executors, as a machine that dies: the pid."""
    worker = info.workers[index - 1]
    os.killpg(worker.pid, signal.SIGKILL)
    return worker.pid
