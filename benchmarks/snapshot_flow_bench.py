"""Benchmark: what `players_history` (AUTO CDC FROM SNAPSHOT, issue 27) adds to an update.

    .venv/bin/python benchmarks/snapshot_flow_bench.py [--rounds 3] [--events 200]

In one process and one Spark session, as a test run has them: the project's pipeline over a
small generated stream into a fresh warehouse, with and without pipelines/players_history.py
(the baseline: the same files less that one), alternating, `--rounds` times each. The first
update applies the two sample exports (data/exports/players); a second update of the same
warehouse finds no new export. Prints the median seconds of each, the ratio, the snapshot
flow's own seconds per phase (its timeline), and the commit.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import commit, stream_records

from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe.timeline import Timeline
from exactly_once.paths import PIPELINES_DIR
from exactly_once.settings.pipeline import load_settings

FLOW = "players_history"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="snapshot-bench-"))
    dump = root / "stream.jsonl"
    write_kcat_jsonl(dump, stream_records(args.events))
    settings = load_settings("local", overrides={"exactly_once.source": f"file:{dump}"})
    without = root / "pipelines-without"
    shutil.copytree(PIPELINES_DIR, without, ignore=shutil.ignore_patterns(
        f"{FLOW}.py", "__pycache__"))
    spark = build_session(root / "spark", log_level="OFF")
    seconds: dict[str, list[float]] = {"with": [], "without": [], "with, again": [],
                                       "without, again": []}
    phases: dict[str, float] = {}
    run_pipeline(spark, settings, root / "warm-up")  # JIT and caches, as after a first test
    for round_ in range(args.rounds):
        for name, files in (("with", PIPELINES_DIR), ("without", without)):
            warehouse = root / f"{name}-{round_}"
            timeline = Timeline()
            started = time.perf_counter()
            run_pipeline(spark, settings, warehouse, pipelines_dir=files, timeline=timeline)
            seconds[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            run_pipeline(spark, settings, warehouse, pipelines_dir=files)
            seconds[f"{name}, again"].append(time.perf_counter() - started)
            if name == "with":
                for span, own in zip(timeline.spans, timeline.self_seconds(), strict=True):
                    if span.flow == FLOW:
                        phases[span.phase] = phases.get(span.phase, 0.0) + own / args.rounds
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"commit {commit()}, {args.rounds} rounds, {args.events} events, python "
          f"{sys.version.split()[0]}")
    for name, value in median.items():
        each = ", ".join(f"{v:.2f}" for v in seconds[name])
        print(f"  update {name:<16} {value:6.2f} s (median of {each})")
    print(f"  first update with / without {median['with'] / median['without']:.2f}x, "
          f"+{median['with'] - median['without']:.2f} s")
    print(f"  {FLOW}'s own seconds in a first update, by phase (mean):")
    for phase, value in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"    {phase:<18} {value:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
