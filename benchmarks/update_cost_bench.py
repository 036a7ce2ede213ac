"""Benchmark: the fixed cost of a pipeline update (issues 19, 25), side by side with a baseline.

    .venv/bin/python benchmarks/update_cost_bench.py                          # this tree
    .venv/bin/python benchmarks/update_cost_bench.py --baseline /path/to/old  # and a checkout
                                                        # of another commit, part by part
    .venv/bin/python benchmarks/update_cost_bench.py --parts warm,ab --profile

Every measurement runs in fresh processes with `PYTHONPATH=<tree>/src`, so a baseline checkout
(e.g. `git worktree add ../before <commit>`, set up with its own `.cache`) is measured by its
own code, on the same machine, minutes apart. Parts:

- warm: a warehouse built from a 1,000-event history in one process; then, in a new process
  and session, updates of ~100 new records each (a new kcat dump per update, the file source
  reading the dumps' glob), as a user's pytest runs them. The first is "the first update of a
  new process"; the 2nd to 4th are the warm measure (target <= 3 s). For each: wall seconds,
  the driver JVM's CPU seconds (/proc), the child processes the JVM started (a JFR recording,
  local/engine/jvm_processes.py) and, in the same session, a plain availableNow append of the
  same dump into one Delta table: the cost of a single streaming query. Then, in the same
  session, the last dump into new warehouses, then the dump before it into each: what a
  test's first and second updates cost.
- ab (this tree only): session settings A/B in one session, alternating update by update
  (`AB_SETTINGS`: the alternative, against what the session sets), so both see the same
  machine load: wall and JVM CPU per update, means per side. The first setting is a placebo,
  whose ratio shows what noise alone makes of the others.
- process: `exactly-once run --quiet` over the demo's 6,300-record stream as a whole process,
  and a process that only starts and stops the Spark session (targets: <= 15 s, <= 2x the bare
  session).
- throughput: `--events` events (200,000) end to end as a process, and the same file appended
  to one Delta table by plain Structured Streaming as a process (target: raw / pipeline >= 0.5).
- engine (this tree only): `exactly-once engine start`, then updates of ~100 records and the
  6,300-record stream, each an `exactly-once run` process that the warm engine runs.

`--profile` adds, for this tree only, the timeline's top costs of a profiled run of each part
(local/observe/timeline.py; Spark jobs counted, which costs a little time of its own).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit, jvm_cpu, stream_records

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl

PARTS = ("warm", "ab", "process", "throughput", "engine")
WARM_UPDATES = 4  # the first of a new process, then three warm ones
FRESH_UPDATES = 2  # then updates into new warehouses, in the same session
# Settings the `ab` part alternates with the session's own: (name, {key: alternative value}).
AB_SETTINGS = (
    # A key nothing reads: its ratio is the noise floor of the others (a Delta key that does not
    # exist in Delta 4.4 once came out at 1.10, winning 4 pairs of 4).
    ("placebo (a key nothing reads)", {"spark.exactly_once.bench.placebo": "true"}),
    ("adaptive query execution off", {"spark.sql.adaptive.enabled": "false"}),
    ("RocksDB changelog checkpointing off",
     {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false"}),
)
AB_PAIRS = 3

# The session and the pipeline's entry point, in the runtime's layout (engine/, execution/,
# observe/) or the one before its wings (b630186 and older: all in local/).
IMPORTS = """
try:
    from exactly_once.local.engine.session import build_session
    from exactly_once.local.execution.pipeline import run_pipeline
except ImportError:
    from exactly_once.local.session import build_session
    from exactly_once.local.pipeline import run_pipeline
"""
# Run by `python -c` in the measured tree: a bare session; a raw append of one file.
BARE_SESSION = IMPORTS + """
import sys; from pathlib import Path
build_session(Path(sys.argv[1]), log_level='OFF').stop()
"""
RAW_APPEND = IMPORTS + """
import sys; from pathlib import Path
from exactly_once.transforms.bronze import read_kcat_file
table = Path(sys.argv[2])
spark = build_session(table.parent / 'raw_warehouse', log_level='OFF')
read_kcat_file(spark, sys.argv[1]).writeStream.format('delta') \\
    .option('checkpointLocation', str(table) + '_checkpoint') \\
    .trigger(availableNow=True).start(str(table)).awaitTermination()
spark.stop()
"""


def process(tree: Path, args: list[str], timeout: float = 1800,
            env: dict[str, str] | None = None) -> tuple[float, str]:
    """Runs `python <args>` with `tree`'s code; returns (wall seconds, stdout)."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{REPO / 'benchmarks'}", **(env or {})}
    started = time.monotonic()
    done = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=timeout)
    seconds = time.monotonic() - started
    if done.returncode:
        sys.exit(f"{tree}: {' '.join(args)} failed ({done.returncode}):\n{done.stdout}"
                 f"{done.stderr[-3000:]}")
    return seconds, done.stdout


def cli_run(tree: Path, source: Path | str, warehouse: Path,
            env: dict[str, str] | None = None) -> tuple[float, str]:
    source = source if str(source).startswith("file:") else f"file:{source}"
    return process(tree, ["-m", "exactly_once.cli", "run", "--quiet", "--source", str(source),
                          "--warehouse", str(warehouse)], env=env)


# -- warm and ab: run inside the measured tree's process (`--worker PART DIR`) -----------------
class Driver:
    """The measured tree's session, its pipeline and what its driver JVM spends."""

    def __init__(self, work: Path) -> None:
        namespace: dict = {}
        if options := os.environ.get("BENCH_JAVA_OPTIONS"):  # another JVM's (jdk25_bench.py)
            from exactly_once.local.engine import jvm_options
            jvm_options.java_options = lambda *more: " ".join((options, *more))
        exec(IMPORTS, namespace)  # noqa: S102 - the measured tree's own modules
        self.build_session = namespace["build_session"]
        self.run_pipeline = namespace["run_pipeline"]
        self.work = work
        self.spark = self.build_session(work / "warehouse", log_level="OFF")
        self.pid = self.spark._jvm.ProcessHandle.current().pid()
        # This tree's recorder works on any tree's JVM: it only needs the session's gateway.
        spec = importlib.util.spec_from_file_location(
            "jvm_processes", REPO / "src/exactly_once/local/engine/jvm_processes.py")
        assert spec and spec.loader
        self.jvm_processes = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.jvm_processes)
        # The Flight Recorder started before the first update, on either tree: started by the
        # first recording, it made that update pay for compiling again (jvm_processes.py).
        self.jvm_processes.start_flight_recorder(self.spark)

    def jvm_cpu(self) -> float:
        return jvm_cpu(self.pid)

    def update(self, source: str, warehouse: str = "warehouse", **kwargs) -> dict:
        """One update into `work/warehouse`: wall and JVM CPU seconds, child processes
        started, its result."""
        from dataclasses import replace

        from exactly_once.settings.pipeline import load_settings

        settings = replace(load_settings("local"), source=source)
        recording = self.jvm_processes.ProcessRecording(self.spark).start()
        cpu, started = self.jvm_cpu(), time.monotonic()
        result = self.run_pipeline(self.spark, settings, self.work / warehouse, **kwargs)
        seconds, cpu = time.monotonic() - started, self.jvm_cpu() - cpu
        processes = recording.stop()
        return {"seconds": seconds, "jvm_cpu": cpu, "processes": len(processes),
                "process_summary": self.jvm_processes.summary(processes), "result": result}


def history_worker(work: Path) -> None:
    from _common import Feed

    driver = Driver(work)
    feed = Feed.for_history(work / "feed", 1000)
    feed.append(1000, seed=1000)
    driver.update(feed.source)
    (work / "feed.pickle").write_bytes(pickle.dumps(feed))
    driver.spark.stop()


def warm_worker(work: Path, profile: bool) -> None:
    """Prints one JSON line per update: seconds, JVM CPU, processes, and the raw append of the
    same dump."""
    import inspect

    from exactly_once.transforms.bronze import read_kcat_file

    driver = Driver(work)
    spark = driver.spark
    feed = pickle.loads((work / "feed.pickle").read_bytes())
    with_timeline = "timeline" in inspect.signature(driver.run_pipeline).parameters
    for i in range(WARM_UPDATES + profile):
        records = feed.append(80, seed=i + 1)
        kwargs = {}
        profiled = i == WARM_UPDATES
        if with_timeline:
            try:
                from exactly_once.local.observe.timeline import Timeline
            except ImportError:
                from exactly_once.local.timeline import Timeline
            kwargs["timeline"] = Timeline(spark_jobs=profiled)
        row = driver.update(feed.source, **kwargs)
        result = row.pop("result")
        latest = sorted(feed.directory.glob("part-*.jsonl"))[-1]
        started = time.monotonic()
        read_kcat_file(spark, str(latest)).writeStream.format("delta") \
            .option("checkpointLocation", str(work / f"raw{i}_checkpoint")) \
            .trigger(availableNow=True).start(str(work / f"raw{i}")).awaitTermination()
        row["raw"] = time.monotonic() - started
        row["top_costs"] = [c.as_row() for c in result.timeline.top_costs(12)] if profiled \
            else []
        print(json.dumps({"update": i + 1, "records": records, "profiled": profiled, **row}),
              flush=True)
    # What most tests pay: an update of a new warehouse (tables, checkpoints and state created,
    # every query's first batch) in a warm session, the last dump's ~100 records; then its
    # second update, the dump before it (every query restarted after its first batch).
    *_, previous, latest = sorted(feed.directory.glob("part-*.jsonl"))
    for i in range(FRESH_UPDATES):
        inbox = work / f"fresh{i}-dumps"
        inbox.mkdir()
        shutil.copy(latest, inbox)
        row = driver.update(f"file:{inbox}/*.jsonl", warehouse=f"fresh{i}")
        shutil.copy(previous, inbox)
        second = driver.update(f"file:{inbox}/*.jsonl", warehouse=f"fresh{i}")
        print(json.dumps({"fresh": i + 1, "seconds": row["seconds"], "jvm_cpu": row["jvm_cpu"],
                          "second": second["seconds"]}), flush=True)
    spark.stop()


def ab_worker(work: Path) -> None:
    """Each setting of AB_SETTINGS against the session's own, alternating update by update."""
    driver = Driver(work)
    spark = driver.spark
    feed = pickle.loads((work / "feed.pickle").read_bytes())
    # The process's first two updates are not measured: the second still pays the JIT (11.0 s
    # against 5-7 s after it, once on the placebo's side).
    seed = 100
    for _ in range(2):
        seed += 1
        feed.append(80, seed=seed)
        driver.update(feed.source)
    for name, alternative in AB_SETTINGS:
        own = {key: spark.conf.get(key, None) for key in alternative}
        for pair in range(AB_PAIRS):
            for side in (("own", "alternative") if pair % 2 == 0 else ("alternative", "own")):
                for key, value in (alternative if side == "alternative" else own).items():
                    if value is None:
                        spark.conf.unset(key)
                    else:
                        spark.conf.set(key, value)
                seed += 1
                feed.append(80, seed=seed)
                row = driver.update(feed.source)
                row.pop("result")
                print(json.dumps({"setting": name, "side": side, **row}), flush=True)
        for key, value in own.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    spark.stop()


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def warm(tree: Path, work: Path, profile: bool,
         env: dict[str, str] | None = None) -> dict[str, float]:
    process(tree, [__file__, "--worker", "history", str(work)], env=env)
    _, out = process(tree, [__file__, "--worker", "warm", str(work), *(["--profile"] * profile)],
                     env=env)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    fresh = [row for row in rows if "fresh" in row]
    rows = [row for row in rows if "fresh" not in row]
    for row in fresh:
        print(f"  a new warehouse's first update {row['fresh']} (warm session): "
              f"{row['seconds']:.1f}s, JVM CPU {row['jvm_cpu']:.1f}s; its second update "
              f"{row['second']:.1f}s")
    for row in rows:
        if row["profiled"]:
            print(f"  profiled update ({row['records']} records, {row['seconds']:.1f}s), "
                  "top costs (flow, phase, own s, spans, Spark jobs, driver CPU s, task CPU s):")
            for cost in row["top_costs"]:
                print(f"    {cost}")
            continue
        print(f"  update {row['update']}: {row['records']} records {row['seconds']:.1f}s, "
              f"JVM CPU {row['jvm_cpu']:.1f}s, child processes {row['process_summary']}; "
              f"raw append of the same dump {row['raw']:.1f}s")
    plain = [r for r in rows if not r["profiled"]]
    first, measured = plain[0], plain[1:]
    warm_seconds = mean([r["seconds"] for r in measured])
    return {"first update of a new process (s)": first["seconds"],
            "warm update, 2nd-4th (mean s)": warm_seconds,
            "first / warm": first["seconds"] / warm_seconds,
            "driver JVM CPU per warm update (mean s)": mean([r["jvm_cpu"] for r in measured]),
            "child processes per warm update (mean)": mean([r["processes"] for r in measured]),
            "raw append, same dumps (mean s)": mean([r["raw"] for r in measured]),
            "a new warehouse's first update, warm session (mean s)":
                mean([r["seconds"] for r in fresh]),
            "its second update, warm session (mean s)": mean([r["second"] for r in fresh])}


def ab(tree: Path, work: Path) -> dict[str, float]:
    process(tree, [__file__, "--worker", "history", str(work)])
    _, out = process(tree, [__file__, "--worker", "ab", str(work)])
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    results = {}
    for name, _ in AB_SETTINGS:
        sides = {side: [r for r in rows if r["setting"] == name and r["side"] == side]
                 for side in ("own", "alternative")}
        for side, mine in sides.items():
            print(f"  {name}, {side}: " + ", ".join(
                f"{r['seconds']:.1f}s/{r['jvm_cpu']:.1f}s CPU" for r in mine))
        for measure in ("seconds", "jvm_cpu"):
            own = mean([r[measure] for r in sides["own"]])
            other = mean([r[measure] for r in sides["alternative"]])
            label = "wall" if measure == "seconds" else "JVM CPU"
            print(f"    {label}: session's own {own:.2f}s, alternative {other:.2f}s, "
                  f"own / alternative {own / other:.2f}")
            results[f"A/B {name}: own / alternative, {label}"] = own / other
    return results


# -- engine: `exactly-once run` processes sent to a warm resident engine (cli/engine_server.py)
def engine(tree: Path, work: Path) -> dict[str, float]:
    """The engine started, a 1,000-event history, then updates of ~100 new records and the demo's
    6,300 records, each an `exactly-once run` process sent to the engine."""
    from _common import Feed

    env = {"EXACTLY_ONCE_HOME": str(work / "home"), "EXACTLY_ONCE_ENGINE": "on"}
    started, _ = process(tree, ["-m", "exactly_once.cli", "engine", "start"], env=env)
    try:
        feed = Feed.for_history(work / "feed", 1000)
        feed.append(1000, seed=1000)
        cli_run(tree, feed.source, work / "warehouse", env)
        seconds = []
        for i in range(WARM_UPDATES):
            records = feed.append(80, seed=i + 1)
            took, _ = cli_run(tree, feed.source, work / "warehouse", env)
            seconds.append(took)
            print(f"  update {i + 1} as a process via the engine: {records} records {took:.1f}s")
        demo, _ = cli_run(tree, demo_stream(work.parent), work / "demo_warehouse", env)
        print(f"  engine start {started:.1f}s; 6,300-record update as a process via the engine "
              f"{demo:.1f}s")
    finally:
        process(tree, ["-m", "exactly_once.cli", "engine", "stop"], env=env)
    return {"engine start (s)": started,
            "first update of a new process, via the engine (s)": seconds[0],
            "update as a process via the engine, 2nd-4th (mean s)": mean(seconds[1:]),
            "6,300-record update, process via the engine (s)": demo}


# -- process and throughput ------------------------------------------------------------------
def demo_stream(work: Path) -> Path:
    stream = work / "demo.jsonl"
    if not stream.exists():  # `exactly-once generate`'s defaults, as `make demo`
        write_kcat_jsonl(stream, as_consumed(generate_stream(GeneratorConfig(
            events=5000, orders=500, players=200, seed=7))))
    return stream


def whole_process(tree: Path, work: Path, profile: bool) -> dict[str, float]:
    stream = demo_stream(work.parent)
    bare, _ = process(tree, ["-c", BARE_SESSION, str(work / "bare_warehouse")])
    run, out = cli_run(tree, stream, work / "warehouse")
    inside = re.search(r"Update finished in ([\d.]+)s", out)
    print(f"  6,300-record update as a process {run:.1f}s (update itself "
          f"{inside.group(1) if inside else '?'}s); bare session process {bare:.1f}s; "
          f"ratio {run / bare:.2f}")
    if profile:
        _, out = process(tree, ["-m", "exactly_once.cli", "run", "--quiet", "--profile",
                                "--source", f"file:{stream}", "--warehouse",
                                str(work / "profiled_warehouse"), "--profile-output",
                                str(work / "trace.json")])
        print("  profiled: " + out[out.index("Top costs"):].replace("\n", "\n  "))
    return {"6,300-record update, process (s)": run, "bare session, process (s)": bare,
            "update / bare session": run / bare}


def throughput(tree: Path, work: Path, events: int) -> dict[str, float]:
    stream = work.parent / f"stream_{events}.jsonl"
    if not stream.exists():
        write_kcat_jsonl(stream, stream_records(events))
    raw, _ = process(tree, ["-c", RAW_APPEND, str(stream), str(work / "raw_table")])
    run, _ = cli_run(tree, stream, work / "warehouse")
    print(f"  {events:,} events end to end {run:.1f}s; raw append process {raw:.1f}s; "
          f"raw / pipeline {raw / run:.2f}")
    return {f"{events:,} events end to end, process (s)": run,
            "raw Delta append, process (s)": raw, "raw / pipeline": raw / run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--baseline", type=Path, help="a checkout of another commit")
    parser.add_argument("--events", type=int, default=200_000, help="throughput")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("PART", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        part, work = args.worker[0], Path(args.worker[1])
        if part == "history":
            history_worker(work)
        elif part == "warm":
            warm_worker(work, args.profile)
        else:
            ab_worker(work)
        return
    parts = [p for p in args.parts.split(",") if p]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}; known: {', '.join(PARTS)}")
    trees = {"this": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    heads = {name: commit_of(tree) for name, tree in trees.items()}
    print("commits: " + ", ".join(f"{name} {head}" for name, head in heads.items()), flush=True)
    results: dict[str, dict[str, float]] = {name: {} for name in trees}
    with tempfile.TemporaryDirectory(prefix="update-cost-") as tmp:
        for part in parts:
            for name, tree in trees.items():
                work = Path(tmp) / name / part
                work.mkdir(parents=True)
                print(f"\n[{part}] {name} ({heads[name]}), load {os.getloadavg()[0]:.1f}",
                      flush=True)
                profile = args.profile and name == "this"
                if part == "warm":
                    results[name].update(warm(tree, work, profile))
                elif part == "ab":
                    if name == "this":
                        results[name].update(ab(tree, work))
                elif part == "process":
                    results[name].update(whole_process(tree, work, profile))
                elif part == "engine":
                    if name == "this":  # the baseline has no resident engine
                        results[name].update(engine(tree, work))
                else:
                    results[name].update(throughput(tree, work, args.events))
    print("\n| measure | " + " | ".join(f"{n} ({heads[n]})" for n in trees)
          + (" | this / baseline |" if args.baseline else " |"))
    print("|---|" + "---:|" * (len(trees) + bool(args.baseline)))
    for measure, value in results["this"].items():
        cells = [f"{results[n][measure]:.2f}" if measure in results[n] else "" for n in trees]
        if args.baseline:
            base = results["baseline"].get(measure)
            cells.append(f"{value / base:.2f}" if base else "")
        print(f"| {measure} | " + " | ".join(cells) + " |")


def commit_of(tree: Path) -> str:
    if tree == REPO:
        return commit()
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                          text=True, check=True).stdout.strip()


if __name__ == "__main__":
    main()
