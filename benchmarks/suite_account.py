"""Where the suite's minutes go: a pytest plugin recording every test's report, and its account
per file, of one run or of a run against a baseline run (each file's ratio).

Record (xdist's controller writes one JSON line per setup, call and teardown of each test):

    PYTHONPATH=benchmarks PYTEST_ADDOPTS="-p suite_account" SUITE_ACCOUNT=/tmp/head.jsonl make test

Account:

    .venv/bin/python benchmarks/suite_account.py /tmp/head.jsonl [--baseline /tmp/base.jsonl]
        [--since COMMIT]

`--since`: also split the worker-minutes into tests named at COMMIT and tests added after it.
The workers' own account (busy minutes, when each ended) shows how even the split was.

The machine's speed moves by up to 2x from one hour to the next, so the controller also times
a fixed pure-Python loop (one core) when the session starts and when it ends, before any test
and after the last, and records the host (CPU, clock, boot id). The loop sees a slower core,
not a JVM's slower memory (2026-11-29: it read fast while a warm update cost 1.6x the JVM CPU
of that morning's); a new boot id says the machine itself was replaced between two runs.

On a 2-core machine the two workers keep both cores busy, so the suite's minutes are its CPU.
The controller samples /proc twice a second while the suite runs and records where that CPU
went: every process the suite started, by what it is (a worker's Spark session, a process's
own JVM, the resident engine, a bundle's own pytest, the Kafka brokers, the cluster's
executors, ...), and the threads of the workers' Spark sessions by name (threads a sample did
not see, a query's short life mostly, count as "ended unseen").

**CPU by test**: each worker records its pid, and the sampler keeps, per worker, the CPU of its
Python and its Spark session at every sample. A test's CPU is their difference across its
window (setup to teardown) plus the whole CPU of the processes first seen below that worker in
the window that ended with it (a CLI process, a broker of its own). A process that outlives the
test it started in (a module or session fixture's broker, cluster or engine) is its fixture's,
listed apart with the test whose setup started it. With two workers on two cores the wall
seconds of a test also hold the other worker's contention; its CPU is what it costs the suite.

**The updates**: each worker also records the window of every pipeline update it runs in its
own session (`PipelineUpdate.run`: its test, whether the warehouse was new, its start and stop),
and the account sums the worker's CPU across them, for new warehouses and existing ones: the
share of the suite's CPU that a faster update could reach (`exactly-once` processes apart).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_runtest_logreport(report) -> None:  # noqa: ANN001 - pytest's TestReport
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the controller records what workers report
        return
    node = getattr(report, "node", None)
    _record({"id": report.nodeid, "when": report.when, "seconds": report.duration,
             "start": report.start, "stop": report.stop, "outcome": report.outcome,
             "worker": node.gateway.id if node is not None else None})


def _record(row: dict) -> None:
    with open(os.environ.get("SUITE_ACCOUNT", "suite-account.jsonl"), "a") as out:
        out.write(json.dumps(row) + "\n")


def machine_probe() -> float:
    """Seconds for a fixed loop of 5 million additions (0.2-0.9 s here): lower is faster."""
    began, total = time.perf_counter(), 0
    for number in range(5_000_000):
        total += number
    return time.perf_counter() - began


def host() -> dict[str, str]:
    """Which machine ran the suite: the CPU as the kernel names it, its clock, and the boot's
    id. A machine replaced between two runs (a new VM on another host) has another boot id,
    and the loop above does not tell: it fits in a core's cache, where a JVM does not."""
    cpu = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    first: dict[str, str] = {}  # the first processor's: each line repeats per processor
    for key, _, value in (line.partition(":") for line in cpu):
        if key.strip() in ("model name", "cpu MHz", "cache size"):
            first.setdefault(key.strip(), value.strip())
    boot = Path("/proc/sys/kernel/random/boot_id")
    return {"cpu": first.get("model name", "?"), "mhz": first.get("cpu MHz", "?"),
            "cache": first.get("cache size", "?"),
            "boot": boot.read_text().strip() if boot.exists() else "?"}


def _probe(when: str) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") and when == "start":  # for the CPU by test
        _record({"worker pid": os.getpid(), "worker": os.environ["PYTEST_XDIST_WORKER"]})
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _record({"probe": when, "seconds": machine_probe(), "at": time.time(), "host": host()})


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_NUMBER = re.compile(r"#?\d+")  # a thread's number in its name: "Thread-12", "GC Thread#0"
# Set by the pytest that samples, for the processes below it: a pytest a test starts (a user's
# bundle tested as a user runs it) inherits the plugin, and must not sample them again.
_SAMPLING = "SUITE_ACCOUNT_SAMPLING"


def _stat(path: str) -> tuple[int, float, bool] | None:
    """(parent pid, CPU seconds, ended) of /proc/<pid>[/task/<tid>]/stat, None once it has gone.
    Ended: a zombie, its CPU final, waiting for its parent to reap it (a cluster's JVMs stay so
    until the worker's next subprocess call)."""
    try:
        fields = Path(path, "stat").read_text().rpartition(")")[2].split()
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, fields[0] == "Z"
    except (OSError, IndexError, ValueError):
        return None


class CpuSampler(threading.Thread):
    """The CPU of every process below this one, sampled until `done` is set: per process its command
    line (again after an exec), parent and CPU since first seen; per thread of a worker's
    Spark session, its CPU by its name."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.processes: dict[int, dict] = {}
        self.threads: dict[tuple[int, int], tuple[str, float, float]] = {}
        # Per xdist worker, (time, CPU of the worker's Python and its Spark session) at each
        # sample: what a test cost in them is the difference across its window.
        self.series: dict[int, list[tuple[float, float]]] = defaultdict(list)
        self.done = threading.Event()

    def run(self) -> None:
        rounds = 0
        while not self.done.wait(0.5):
            self.sample(threads=rounds % 4 == 0)
            rounds += 1
        self.sample(threads=True)

    def sample(self, threads: bool) -> None:
        mine = {os.getpid()}
        seen = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (found := _stat(entry.path)) is not None:
                seen[int(entry.name)] = found
        changed = True  # a child's pid may be lower than its parent's: to a fixpoint
        while changed:
            changed = False
            for pid, (parent, _, _) in seen.items():
                if parent in mine and pid not in mine:
                    mine.add(pid)
                    changed = True
        now = time.time()
        own: dict[int, float] = defaultdict(float)  # each worker's Python and Spark session
        for pid in mine - {os.getpid()}:
            parent, cpu, ended = seen[pid]
            known = self.processes.get(pid)
            if known is None or _is_launcher(known["command"]):  # read again once exec'd
                try:
                    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(
                        b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                known = self.processes.setdefault(pid, {"parent": parent, "first": cpu,
                                                        "seen": now, "last": now})
                known["command"] = command
                known["worker"] = self.worker_of(pid)
            known["cpu"] = cpu  # a zombie's is final, and still its worker's
            if not ended:
                known["last"] = now
            session = self.is_session(pid)
            if threads and session and not ended:
                self.sample_threads(pid)
            if known["worker"] is not None and (known["worker"] == pid or session):
                own[known["worker"]] += cpu
        for worker, cpu in own.items():
            self.series[worker].append((now, cpu))

    def worker_of(self, pid: int) -> int | None:
        """The pid of the xdist worker `pid` descends from (itself included)."""
        while pid in self.processes:
            if "exec(eval(sys.stdin" in self.processes[pid].get("command", ""):
                return pid
            pid = self.processes[pid]["parent"]
        return None

    def sample_threads(self, pid: int) -> None:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tasks:
            found = _stat(f"/proc/{pid}/task/{tid}")
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                continue
            if found is not None:
                first = self.threads.get((pid, int(tid)), (name, found[1], 0.0))[1]
                self.threads[(pid, int(tid))] = (name, first, found[1])

    def role(self, pid: int) -> str:
        """What started the JVM `pid`: a worker ("session"), an `exactly-once` process ("cli",
        or "engine" for the resident engine), a pytest of a bundle ("bundle's pytest")."""
        parent = self.processes.get(self.processes[pid]["parent"], {}).get("command", "")
        if "exec(eval(sys.stdin" in parent:
            return "session"
        if "exactly_once.cli" in parent or "bin/exactly-once" in parent:
            return "engine" if "engine_server" in parent else "cli"
        return "bundle's pytest" if "pytest" in parent else "other"

    def is_session(self, pid: int) -> bool:
        """Whether `pid` is a worker's Spark session (its threads are sampled)."""
        return self.kind(pid) == SPARK_JVMS["session"]

    def kind(self, pid: int) -> str:
        command = self.processes[pid]["command"]
        program = Path(command.split(" ", 1)[0]).name
        if program == "java":
            if "SparkSubmit" in command and "launcher.Main" not in command:
                return SPARK_JVMS.get(self.role(pid), "other Spark JVMs")
            return _first_match(command, JVM_KINDS, "other JVMs")
        if program.startswith("python"):
            return _first_match(command, PYTHON_KINDS, "other Python")
        return program or "?"

    def account(self) -> dict:
        kinds: dict[str, float] = defaultdict(float)
        for pid, known in self.processes.items():
            kinds[self.kind(pid)] += known["cpu"] - known["first"]
        threads: dict[str, float] = defaultdict(float)
        for name, first, last in self.threads.values():
            threads[_NUMBER.sub("#", name)] += last - first
        sessions = kinds.get(SPARK_JVMS["session"])
        if sessions is not None:
            threads["ended unseen"] = sessions - sum(threads.values())
        processes = [{"kind": self.kind(pid), "cpu": round(known["cpu"] - known["first"], 2),
                      "seen": known["seen"], "last": known["last"],
                      "worker": known.get("worker"), "command": known["command"][:200]}
                     for pid, known in self.processes.items()
                     if known["cpu"] - known["first"] >= 0.1]
        series = {worker: [(round(t, 2), round(cpu, 2)) for t, cpu in points]
                  for worker, points in self.series.items()}
        return {"cpu": dict(kinds), "session threads": dict(threads),
                "processes": processes, "series": series}


# (a part of the command line, what the process is): the first that matches
JVM_KINDS = (("kafka.Kafka", "Kafka broker JVMs"), ("kafka.tools", "Kafka tools' JVMs"),
             ("launcher.Main", "Spark's launcher JVMs (spark-submit)"),
             ("CoarseGrainedExecutorBackend", "the cluster's executor JVMs"),
             ("deploy.master", "the cluster's master and workers"),
             ("deploy.worker", "the cluster's master and workers"))
PYTHON_KINDS = (("exec(eval(sys.stdin", "the workers (Python)"),
                ("pyspark.daemon", "PySpark's Python workers"),
                ("exactly_once.cli", "`exactly-once` processes (Python)"),
                ("bin/exactly-once", "`exactly-once` processes (Python)"),
                ("pytest", "a bundle's own pytest (Python)"))
SPARK_JVMS = {"session": "the workers' Spark sessions (JVM)",
              "cli": "`exactly-once` processes' JVMs", "engine": "the resident engine's JVM",
              "bundle's pytest": "a bundle's own pytest (JVM)"}


# Programs that exec what they start: a process first seen as one of them is read again until it
# is what it ran (a worker's JVM first seen as `env`, between its fork and its exec).
LAUNCHERS = frozenset({"bash", "sh", "env", "setsid"})


def _is_launcher(command: str) -> bool:
    return Path(command.split(" ", 1)[0]).name in LAUNCHERS


def _first_match(command: str, kinds: tuple[tuple[str, str], ...], otherwise: str) -> str:
    return next((kind for part, kind in kinds if part in command), otherwise)


_sampler: CpuSampler | None = None


def pytest_configure(config) -> None:  # noqa: ANN001, ARG001 - pytest's hook
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _watch_updates()


def _watch_updates() -> None:
    """In a worker, each in-process pipeline update's window: the test it ran in, whether its
    warehouse was new (no event log yet), its start and stop. The account reads the worker's
    CPU across these windows: what the suite's updates cost, against everything else."""
    try:  # a pytest a test starts inherits the plugin, in an environment that may lack it
        from exactly_once.local.execution.update import PipelineUpdate
    except ImportError:
        return

    run = PipelineUpdate.run

    def timed(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - run's own
        new = not self.warehouse.event_log_path().exists()
        began = time.time()
        try:
            return run(self, *args, **kwargs)
        finally:
            _record({"update": os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0],
                     "new warehouse": new, "pid": os.getpid(), "start": began,
                     "stop": time.time()})

    PipelineUpdate.run = timed  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers
def pytest_sessionstart(session) -> None:  # noqa: ANN001, ARG001 - pytest's hook
    global _sampler
    _probe("start")
    if not os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get(_SAMPLING) \
            and Path("/proc/self/stat").exists():
        os.environ[_SAMPLING] = str(os.getpid())
        _sampler = CpuSampler()
        _sampler.start()


@pytest.hookimpl(trylast=True)  # after xdist's workers have ended
def pytest_sessionfinish(session) -> None:  # noqa: ANN001, ARG001 - pytest's hook
    _probe("end")
    if _sampler is not None:
        _sampler.done.set()
        _sampler.join()
        _record(_sampler.account())


def _rows(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def probes(path: str) -> dict[str, float]:
    """The controller's probes: the first start and the last end. A pytest that a test starts
    probes too, in between (it inherits the plugin and is no xdist worker)."""
    found: dict[str, float] = {}
    for row in (r for r in _rows(path) if "probe" in r):
        if row["probe"] == "start":
            found.setdefault("start", row["seconds"])
        else:
            found["end"] = row["seconds"]
    return found


def host_of(path: str) -> dict[str, str]:
    """The host of the run's first probe (none before the probe recorded it)."""
    return next((r["host"] for r in _rows(path) if "host" in r), {})


def cpu_of(path: str) -> dict:
    """The controller's CPU account (a pytest a test starts records none)."""
    return next((r for r in _rows(path) if "cpu" in r), {})


def read(path: str) -> list[dict]:
    # A pytest that a test starts (a user's bundle tested as a user runs it) inherits the
    # plugin: its rows have no worker and are already inside the test that started it. A
    # worker's own row (its pid, for the CPU by test) is no test's.
    return [row for row in _rows(path) if row.get("worker") is not None and "id" in row]


def per_file(rows: list[dict]) -> dict[str, float]:
    files: dict[str, float] = defaultdict(float)
    for row in rows:
        files[row["id"].split("::")[0]] += row["seconds"]
    return files


# A process still seen this long after the teardown of the test it started in is a fixture's.
OUTLIVED = 5.0


def _value_at(points: list, moment: float) -> float:
    """A sampled series' (time, CPU) value at `moment`: its last sample by then (the first
    before any), 0 for no sample."""
    index = bisect.bisect_right([t for t, _ in points], moment)
    return points[max(index - 1, 0)][1] if points else 0.0


def cpu_per_test(path: str, rows: list[dict]) -> tuple[dict[str, tuple[float, float]],
                                                         list[tuple[str, dict]]]:
    """Each test's CPU, from setup to teardown on its worker: (the worker's Python and Spark
    session, the processes first seen below that worker in that window that ended with it,
    whole lives); then the processes that outlived that window, each with its test."""
    account = cpu_of(path)
    names = {str(r["worker pid"]): r["worker"] for r in _rows(path) if "worker pid" in r}
    series = {names.get(pid): points for pid, points in account.get("series", {}).items()
              if points}
    if not series:
        return {}, []
    windows: dict[str, list] = {}
    for row in rows:
        window = windows.setdefault(row["id"], [row["start"], row["stop"], row["worker"]])
        window[0], window[1] = min(window[0], row["start"]), max(window[1], row["stop"])

    def at(worker: str, moment: float) -> float:
        return _value_at(series.get(worker, []), moment)

    started: dict[str, list[dict]] = defaultdict(list)
    for process in account.get("processes", []):
        if process["worker"] is not None:
            started[names.get(str(process["worker"]), "?")].append(process)
    found, outlived = {}, []
    for test, (start, stop, worker) in windows.items():
        own = at(worker, stop) - at(worker, start)
        theirs = 0.0
        for process in started[worker]:
            if not start <= process["seen"] <= stop or process["kind"] in (
                    "the workers (Python)", SPARK_JVMS["session"]):
                continue
            if process["last"] > stop + OUTLIVED:
                outlived.append((test, process))
            else:
                theirs += process["cpu"]
        found[test] = (own, theirs)
    return found, outlived


def updates_of(path: str) -> dict[str, dict[str, float]]:
    """The workers' in-process updates, new warehouses' and the others': how many, their wall
    seconds, and the CPU of their worker's Python and Spark session across their windows."""
    account = cpu_of(path)
    series = {int(pid): points for pid, points in account.get("series", {}).items() if points}

    def at(pid: int, moment: float) -> float:
        return _value_at(series.get(pid, []), moment)

    found: dict[str, dict[str, float]] = {}
    for row in (r for r in _rows(path) if "update" in r and int(r["pid"]) in series):
        kind = found.setdefault("a new warehouse" if row["new warehouse"] else "an existing one",
                                {"updates": 0, "wall": 0.0, "cpu": 0.0})
        kind["updates"] += 1
        kind["wall"] += row["stop"] - row["start"]
        kind["cpu"] += at(int(row["pid"]), row["stop"]) - at(int(row["pid"]), row["start"])
    return found


def names_at(commit: str) -> set[str]:
    found = subprocess.run(["git", "grep", "-h", "-o", "-E", r"^(async )?def test_\w+", commit,
                            "--", "tests"], capture_output=True, text=True, cwd=REPO).stdout
    return {line.split()[-1] for line in found.splitlines()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("--baseline")
    parser.add_argument("--since")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = read(args.run)
    began, ended = min(r["start"] for r in rows), max(r["stop"] for r in rows)
    print(f"{args.run}: {len({r['id'] for r in rows})} tests, "
          f"{sum(r['seconds'] for r in rows) / 60:.1f} worker-minutes in "
          f"{(ended - began) / 60:.1f} minutes")
    for worker in sorted({r["worker"] for r in rows}):
        mine = [r for r in rows if r["worker"] == worker]
        print(f"  {worker}: busy {sum(r['seconds'] for r in mine) / 60:.1f} min, "
              f"ended at {(max(r['stop'] for r in mine) - began) / 60:.1f}")
    for name, path in (("this run", args.run), ("baseline", args.baseline)):
        found = probes(path) if path else {}
        if found:
            print(f"  machine probe, {name}: " + ", ".join(
                f"{when} {seconds:.2f} s" for when, seconds in found.items()))
        machine = host_of(path) if path else {}
        if machine:
            print(f"  host, {name}: {machine['cpu']} at {machine['mhz']} MHz, "
                  f"cache {machine['cache']}, boot {machine['boot']}")
    cpu = cpu_of(args.run)
    if cpu:
        total = sum(cpu["cpu"].values())
        print(f"CPU of the processes the suite started: {total / 60:.1f} minutes")
        for kind, seconds in sorted(cpu["cpu"].items(), key=lambda item: -item[1])[:12]:
            print(f"  {seconds / 60:6.1f} min {100 * seconds / total:5.1f}%  {kind}")
        threads = cpu["session threads"]
        print("  the workers' Spark sessions, by thread:")
        for name, seconds in sorted(threads.items(), key=lambda item: -item[1])[:12]:
            print(f"    {seconds / 60:6.1f} min  {name}")
        workers = sum(points[-1][1] - points[0][1] for points in cpu["series"].values()
                      if points)
        updates = updates_of(args.run)
        if updates:
            print(f"the workers' Python and Spark sessions: {workers / 60:.1f} CPU-minutes, of "
                  f"them in their in-process updates:")
            for kind, seen in updates.items():
                print(f"  {seen['cpu'] / 60:6.1f} min {100 * seen['cpu'] / workers:5.1f}%  "
                      f"{int(seen['updates'])} updates of {kind}, "
                      f"{seen['wall'] / 60:.1f} minutes of wall")
    files = per_file(rows)
    base = per_file(read(args.baseline)) if args.baseline else {}
    common = set(files) & set(base)
    if common:
        print(f"files in both runs: {len(common)}, worker-minutes "
              f"{sum(files[f] for f in common) / 60:.1f} against "
              f"{sum(base[f] for f in common) / 60:.1f} "
              f"({sum(files[f] for f in common) / sum(base[f] for f in common):.2f})")
    for name, seconds in sorted(files.items(), key=lambda item: -item[1])[:args.top]:
        against = f"  {base[name]:7.1f}  {seconds / base[name]:5.2f}" if name in base else ""
        print(f"{seconds:7.1f}{against}  {name}")
    per_test, outlived = cpu_per_test(args.run, rows)
    if per_test:
        own = sum(o for o, _ in per_test.values())
        theirs = sum(t for _, t in per_test.values())
        print(f"CPU by test (the worker's Python and Spark session + the processes the test "
              f"started): {own / 60:.1f} + {theirs / 60:.1f} minutes; the fixtures' processes "
              f"(outlived the test they started in): "
              f"{sum(p['cpu'] for _, p in outlived) / 60:.1f}")
        for test, process in sorted(outlived, key=lambda item: -item[1]["cpu"])[:args.top // 3]:
            print(f"  {process['cpu']:7.1f}  {process['kind']}, "
                  f"{(process['last'] - process['seen']) / 60:.1f} min, from {test[:90]}")
        by_file: dict[str, float] = defaultdict(float)
        for test, (o, t) in per_test.items():
            by_file[test.split("::")[0]] += o + t
        for name, seconds in sorted(by_file.items(), key=lambda item: -item[1])[:args.top]:
            print(f"  {seconds:7.1f}  {name}")
        print("  the tests:")
        for test, (o, t) in sorted(per_test.items(), key=lambda item: -sum(item[1]))[:args.top]:
            print(f"  {o + t:7.1f} ({o:5.1f} + {t:5.1f})  {test[:130]}")
    if args.since:
        before = names_at(args.since)
        added = sum(r["seconds"] for r in rows
                    if re.sub(r"\[.*", "", r["id"].split("::")[-1]) not in before)
        print(f"tests named at {args.since}: {(sum(r['seconds'] for r in rows) - added) / 60:.1f}"
              f" worker-minutes; added since: {added / 60:.1f}")


if __name__ == "__main__":
    main()
