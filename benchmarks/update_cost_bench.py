"""Benchmark: the fixed cost of a pipeline update (issue 19), side by side with a baseline tree.

    .venv/bin/python benchmarks/update_cost_bench.py                          # this tree
    .venv/bin/python benchmarks/update_cost_bench.py --baseline /path/to/old  # and a checkout
                                                        # of another commit, part by part
    .venv/bin/python benchmarks/update_cost_bench.py --parts warm,process --profile

Every measurement runs in fresh processes with `PYTHONPATH=<tree>/src`, so a baseline checkout
(e.g. `git worktree add ../before <commit>`) is measured by its own code, on the same machine,
minutes apart. Parts:

- warm: one process, one Spark session, a warehouse built from a 1,000-event history, then
  three updates of ~100 new records each (a new kcat dump per update, the file source reading
  the dumps' glob), as a user's pytest runs them. The 2nd and 3rd are the measure (target
  <= 3 s); next to them, in the same session, a plain availableNow append of the same dump into
  one Delta table: the cost of a single streaming query, the floor for one flow.
- process: `exactly-once run --quiet` over the demo's 6,300-record stream as a whole process,
  and a process that only starts and stops the Spark session (targets: <= 15 s, <= 2x the bare
  session).
- throughput: `--events` events (200,000) end to end as a process, and the same file appended
  to one Delta table by plain Structured Streaming as a process (target: raw / pipeline >= 0.5).

`--profile` adds, for this tree only, the timeline's top costs of a profiled run of each part
(local/observe/timeline.py; Spark jobs counted, which costs a little time of its own).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit, stream_records

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl

PARTS = ("warm", "process", "throughput")
WARM_UPDATES = 3

# Run by `python -c` in the measured tree: a bare session; a raw append of one file.
BARE_SESSION = """
import sys; from pathlib import Path
from exactly_once.local.engine.session import build_session
build_session(Path(sys.argv[1]), log_level='OFF').stop()
"""
RAW_APPEND = """
import sys; from pathlib import Path
from exactly_once.local.engine.session import build_session
from exactly_once.transforms.bronze import read_kcat_file
table = Path(sys.argv[2])
spark = build_session(table.parent / 'raw_warehouse', log_level='OFF')
read_kcat_file(spark, sys.argv[1]).writeStream.format('delta') \\
    .option('checkpointLocation', str(table) + '_checkpoint') \\
    .trigger(availableNow=True).start(str(table)).awaitTermination()
spark.stop()
"""


def process(tree: Path, args: list[str], timeout: float = 1800) -> tuple[float, str]:
    """Runs `python <args>` with `tree`'s code; returns (wall seconds, stdout)."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{REPO / 'benchmarks'}"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=timeout)
    seconds = time.monotonic() - started
    if done.returncode:
        sys.exit(f"{tree}: {' '.join(args)} failed ({done.returncode}):\n{done.stdout}"
                 f"{done.stderr[-3000:]}")
    return seconds, done.stdout


def cli_run(tree: Path, source: Path, warehouse: Path) -> tuple[float, str]:
    return process(tree, ["-m", "exactly_once.cli", "run", "--quiet", "--source",
                          f"file:{source}", "--warehouse", str(warehouse)])


# -- warm: runs inside the measured tree's process (`--worker warm`) --------------------------
def warm_worker(work: Path, profile: bool) -> None:
    """Prints one JSON line per update: seconds, and the raw append of the same dump."""
    import inspect
    from dataclasses import replace

    from _common import Feed

    from exactly_once.config import load_settings
    from exactly_once.local.engine.session import build_session
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.transforms.bronze import read_kcat_file

    spark = build_session(work / "warehouse", log_level="OFF")
    settings = load_settings("local")
    feed = Feed.for_history(work / "feed", 1000)
    feed.append(1000, seed=1000)
    run_pipeline(spark, replace(settings, source=feed.source), work / "warehouse")
    with_timeline = "timeline" in inspect.signature(run_pipeline).parameters
    for i in range(WARM_UPDATES + profile):
        records = feed.append(80, seed=i + 1)
        kwargs = {}
        if with_timeline:
            from exactly_once.local.observe.timeline import Timeline
            kwargs["timeline"] = Timeline(spark_jobs=i == WARM_UPDATES)
        started = time.monotonic()
        result = run_pipeline(spark, replace(settings, source=feed.source), work / "warehouse",
                              **kwargs)
        seconds = time.monotonic() - started
        latest = sorted(feed.directory.glob("part-*.jsonl"))[-1]
        started = time.monotonic()
        read_kcat_file(spark, str(latest)).writeStream.format("delta") \
            .option("checkpointLocation", str(work / f"raw{i}_checkpoint")) \
            .trigger(availableNow=True).start(str(work / f"raw{i}")).awaitTermination()
        raw = time.monotonic() - started
        costs = result.timeline.top_costs(12) if i == WARM_UPDATES else []
        print(json.dumps({"update": i + 1, "records": records, "seconds": seconds, "raw": raw,
                          "profiled": i == WARM_UPDATES, "top_costs": costs}), flush=True)
    spark.stop()


def warm(tree: Path, work: Path, profile: bool) -> dict[str, float]:
    _, out = process(tree, [__file__, "--worker", "warm", str(work), *(["--profile"] * profile)])
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for row in rows:
        if row["profiled"]:
            print(f"  profiled update ({row['records']} records, {row['seconds']:.1f}s), "
                  "top costs (flow, phase, own s, spans, Spark jobs):")
            for cost in row["top_costs"]:
                print(f"    {cost}")
            continue
        print(f"  update {row['update']}: {row['records']} records {row['seconds']:.1f}s; "
              f"raw append of the same dump {row['raw']:.1f}s")
    measured = [r for r in rows if not r["profiled"]][1:]  # the 2nd and 3rd
    return {"warm update, 2nd-3rd (mean s)": sum(r["seconds"] for r in measured) / len(measured),
            "raw append, same dumps (mean s)": sum(r["raw"] for r in measured) / len(measured)}


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
        warm_worker(Path(args.worker[1]), args.profile)
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
                elif part == "process":
                    results[name].update(whole_process(tree, work, profile))
                else:
                    results[name].update(throughput(tree, work, args.events))
    print("\n| measure | " + " | ".join(f"{n} ({heads[n]})" for n in trees)
          + (" | this / baseline |" if args.baseline else " |"))
    print("|---|" + "---:|" * (len(trees) + bool(args.baseline)))
    for measure, value in results["this"].items():
        cells = [f"{results[n][measure]:.2f}" for n in trees]
        if args.baseline:
            cells.append(f"{value / results['baseline'][measure]:.2f}")
        print(f"| {measure} | " + " | ".join(cells) + " |")


def commit_of(tree: Path) -> str:
    if tree == REPO:
        return commit()
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                          text=True, check=True).stdout.strip()


if __name__ == "__main__":
    main()
