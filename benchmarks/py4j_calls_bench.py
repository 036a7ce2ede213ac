"""Benchmark: what an update builds in the driver, as SQL text in few py4j calls (this tree)
against another commit's Column-by-Column building, in the user's loop: warm updates of an
existing warehouse.

    .venv/bin/python benchmarks/py4j_calls_bench.py [--pairs 8] [--baseline REV]

One warm session, as the suite's: a warehouse built from a 1,000-event history, then updates of
80 new events each (`update_cost_bench.py`'s feed), each applying a batch to the pipeline's four
AUTO CDC targets. Side B runs `--baseline`'s `auto_cdc/{changes,scd1,scd2}.py`, its
`apply_expectations` (graph/expectations.py) and its silver `rule_failures`
(transforms/silver.py), each from git, imported as modules of their own (the rest of the runtime
this tree's); side A this tree's. The two alternate (ABBA) after two warm-up pairs. Printed per
update: wall s, driver JVM CPU s, the Python process's CPU s, the seconds of the AUTO CDC
batches' "plan" steps (the timeline's, summed over the flows, which run side by side) and the
py4j calls the update sent; then the means and A / B. Both sides write the same warehouse in
turn: that they give the same rows is the tests' question, not this benchmark's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import baseline_module, commit, history_warehouse, jvm_cpu

BASELINE = "2f3d237"  # a column, an alias and a list element a py4j call each


def python_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--baseline", default=BASELINE, help="a git revision")
    args = parser.parse_args()

    from py4j import clientserver

    from exactly_once.local.auto_cdc import scd1, scd2, writer
    from exactly_once.local.execution import update as pipeline_update
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.local.observe.timeline import Timeline
    from exactly_once.transforms import silver

    work = Path(tempfile.mkdtemp(prefix="py4j-calls-bench-"))
    old = {name: baseline_module(args.baseline, path, work) for name, path in (
        ("changes", "local/auto_cdc/changes.py"), ("scd1", "local/auto_cdc/scd1.py"),
        ("scd2", "local/auto_cdc/scd2.py"), ("expectations", "local/graph/expectations.py"),
        ("silver", "transforms/silver.py"))}
    sides = {"A": (scd1, scd2, pipeline_update.apply_expectations, silver.rule_failures),
             "B": (old["scd1"], old["scd2"], old["expectations"].apply_expectations,
                   old["silver"].rule_failures)}

    calls = [0]  # py4j calls sent, by every thread
    send = clientserver.JavaClient.send_command

    def counted(self, command, *rest, **named):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return send(self, command, *rest, **named)

    clientserver.JavaClient.send_command = counted  # type: ignore[method-assign]
    spark, pid, feed, settings = history_warehouse(work)
    updates = 0

    def update(side: str) -> tuple[float, float, float, float, int]:
        nonlocal updates
        (writer.scd1, writer.scd2, pipeline_update.apply_expectations,  # type: ignore[assignment]
         silver.rule_failures) = sides[side]
        feed.append(80, seed=100 + updates)
        updates += 1
        timeline = Timeline()
        calls[0] = 0
        cpu, py, began = jvm_cpu(pid), python_cpu(), time.monotonic()
        run_pipeline(spark, settings, work / "warehouse", timeline=timeline)
        plans = sum(s.seconds for s in timeline.spans if s.phase == "plan")
        return (time.monotonic() - began, jvm_cpu(pid) - cpu, python_cpu() - py, plans,
                calls[0])

    print(f"commit {commit()} against {args.baseline}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    for side in "ABBA":  # the session's first updates: not measured
        update(side)
    found: dict[str, list[tuple[float, float, float, float, int]]] = {"A": [], "B": []}
    for pair in range(args.pairs):
        for side in ("AB" if pair % 2 == 0 else "BA"):
            taken = update(side)
            found[side].append(taken)
            print(f"  {side} {taken[0]:6.2f} s  JVM CPU {taken[1]:6.2f} s  Python CPU "
                  f"{taken[2]:5.2f} s  AUTO CDC plans {taken[3]:5.2f} s  py4j calls {taken[4]}",
                  flush=True)
    (writer.scd1, writer.scd2, pipeline_update.apply_expectations,  # type: ignore[assignment]
     silver.rule_failures) = sides["A"]
    spark.stop()
    shutil.rmtree(work)
    for i, measure in enumerate(("wall s", "JVM CPU s", "Python CPU s", "AUTO CDC plans s",
                                 "py4j calls")):
        a, b = ([r[i] for r in found[side]] for side in "AB")
        print(f"{measure}: A {statistics.mean(a):.2f}, B {statistics.mean(b):.2f}, "
              f"A / B {statistics.mean(a) / statistics.mean(b):.3f} "
              f"(medians {statistics.median(a) / statistics.median(b):.3f})")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
