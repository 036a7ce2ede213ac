"""Benchmark: what a new JVM's warm-up costs a large micro-batch (issue 58's throughput target).

    .venv/bin/python benchmarks/warmup_bench.py [--events 200000] [--runs 3]

The throughput part's stream (`_common.stream_records`) goes through bronze into a Delta table
once. Then, in a new process per mode, the orders topic's parse and its Delta append run as an
update runs them (an availableNow `foreachBatch` query over that table, the update's session
settings, `batch_expressions` choosing generated code for a batch this large; or interpreted,
every expression), `--runs` times into new tables. Printed per run: wall, the driver JVM's CPU,
and that CPU by thread (executor tasks, the JIT's compiler threads, ...); then, per mode, the
first run against the last: what the same work costs before the JIT has compiled Spark's code.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import (
    REPO,
    commit,
    cpu_seconds,
    driver_pid,
    jvm_cpu,
    stream_records,
    suite_session,
    write_bronze,
)

MODES = ("generated", "interpreted")


def threads(pid: int) -> Counter:
    """CPU seconds so far of each thread of `pid`, by its name with numbers folded."""
    found: Counter = Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            found[(re.sub(r"\d+", "#", name), tid)] += cpu_seconds(f"/proc/{pid}/task/{tid}")
        except OSError:
            continue
    return found


def runs(mode: str, bronze: str, count: int, work: Path) -> None:
    """In this process: `count` parses and appends of bronze's orders, printed as measured."""
    from exactly_once.local.engine.update_settings import applied, batch_expressions, for_update
    from exactly_once.settings.pipeline import load_settings
    from exactly_once.transforms import silver

    spark = suite_session(work)
    pid = driver_pid(spark)
    topic = next(t for t in load_settings("local").topics.values() if t.kafka_topic == "orders")
    for run in range(1, count + 1):
        out = str(work / f"parsed_{run}")

        def each(batch, batch_id: int, out: str = out) -> None:  # noqa: ANN001 - a DataFrame
            if mode == "generated":
                with batch_expressions(batch):
                    batch.write.format("delta").mode("append").save(out)
            else:
                batch.write.format("delta").mode("append").save(out)

        parsed = silver.parse_events(spark.readStream.format("delta").load(bronze), topic)
        before, cpu, began = threads(pid), jvm_cpu(pid), time.monotonic()
        with applied(spark, for_update()):
            parsed.writeStream.foreachBatch(each).option("checkpointLocation", out + "_cp") \
                .trigger(availableNow=True).start().awaitTermination()
        wall, cpu = time.monotonic() - began, jvm_cpu(pid) - cpu
        by_name: Counter = Counter()
        for (name, tid), seconds in threads(pid).items():
            by_name[name] += seconds - before.get((name, tid), 0.0)
        print(f"{mode} run {run}: wall {wall:.2f} s, JVM CPU {cpu:.2f} s; " + ", ".join(
            f"{name} {seconds:.1f}" for name, seconds in by_name.most_common(4)), flush=True)
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "BRONZE", "WORK"),
                        help=argparse.SUPPRESS)  # MODE "bronze": BRONZE is made from WORK's dump
    args = parser.parse_args()
    if args.worker:
        mode, bronze, work = args.worker
        if mode == "bronze":
            spark = suite_session(Path(work))
            write_bronze(spark, Path(work) / "stream.jsonl", Path(bronze))
            spark.stop()
        else:
            runs(mode, bronze, args.runs, Path(work))
        return

    from exactly_once.kafka.kcat import write_kcat_jsonl

    work = Path(tempfile.mkdtemp(prefix="warmup-bench-"))
    bronze = work / "bronze"
    write_kcat_jsonl(work / "stream.jsonl", stream_records(args.events))

    def worker(mode: str, directory: Path) -> str:
        """A process of its own, so that each mode's JVM starts cold: its output."""
        return subprocess.run(
            [sys.executable, __file__, "--runs", str(args.runs), "--worker", mode, str(bronze),
             str(directory)], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO / 'benchmarks'}"}).stdout

    worker("bronze", work)
    print(f"commit {commit()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{args.events:,} events", flush=True)
    for mode in MODES:
        lines = [line for line in worker(mode, work / mode).splitlines() if " run " in line]
        print("\n".join(lines), flush=True)
        first, last = (float(re.search(r"JVM CPU ([\d.]+)", line).group(1))  # type: ignore[union-attr]
                       for line in (lines[0], lines[-1]))
        print(f"{mode}: the first run's JVM CPU {first / last:.2f}x the last's", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
