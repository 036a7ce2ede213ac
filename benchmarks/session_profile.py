"""Profile: where a warm session's CPU goes in the updates most tests make, by Spark and Delta
operation (issue 58's choice of road), from the driver JVM's own sampler.

    .venv/bin/python benchmarks/session_profile.py            # 6 updates, the last 3 sampled
    .venv/bin/python benchmarks/session_profile.py --updates 8 --sampled 4 --keep /tmp/profile

Each update is a test's: a new warehouse fed the crash sweep's two dozen records of both topics
(redeliveries, out-of-order sequences, deletes, malformed records), run by `run_pipeline` in one
session, as the suite's workers run them. The JVM's Flight Recorder samples every thread (its
`profile` settings) over the last `--sampled` updates, with whole stacks (JFR keeps 64 frames
unless told more, and `jfr print` shows 5 unless told more: Spark's stacks are hundreds deep, so
a split by the operation at the bottom of a stack needs both). It prints the updates' wall and
JVM CPU seconds, then the share of the samples by thread and by operation: a sample counts in
every operation on its stack, so the operations overlap (a Delta write's analysis is in both).

A profile, not a timing: its figure is each operation's share, to compare with the same run of
another commit (`--keep` both and read them side by side).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from _common import REPO, commit, jvm_cpu

sys.path.insert(0, str(REPO / "tests"))
from crash_points import write_tiny_dump  # noqa: E402 - the crash sweep's feed, as the tests'

STACK_DEPTH = 2048

# Whether a sample is in an operation: (the stack as one text, innermost frame first; its frames).
Match = Callable[[str, list[str]], bool]


def on_stack(pattern: str) -> Match:
    return lambda stack, frames: re.search(pattern, stack) is not None


def _asked_by_python(stack: str, frames: list[str]) -> bool:
    """Whether the stack analyzes a DataFrame a py4j call built: the first caller past the
    analyzer that is a py4j command or Spark's or Delta's own machinery (a write, a snapshot,
    a micro-batch) is the py4j command."""
    if "Analyzer.executeAndCheck" not in stack:
        return False
    start = next(i for i, f in enumerate(frames) if "Analyzer.executeAndCheck" in f)
    for frame in frames[start + 1:]:
        if frame.startswith("py4j.commands."):
            return True
        if re.match(r"org\.apache\.spark\.sql\.(delta\.|execution\.streaming\.)", frame):
            return False
    return False


# (name, match); indented names are parts of the one above.
OPERATIONS: list[tuple[str, Match]] = [
    ("the analyzer (fixed point)", on_stack(r"Analyzer\.executeAndCheck")),
    ("  of Delta's statistics expression, once per write", on_stack(r"getStatsColExpr")),
    ("  of DataFrames built through py4j (the runtime's and the pipeline's Python)",
     _asked_by_python),
    ("every rule executor's metering (QueryExecutionMetering)",
     on_stack(r"QueryExecutionMetering")),
    ("  its totals, summed before and after each run",
     on_stack(r"RuleExecutor\$\.getCurrentMetrics")),
    ("physical planning (executedPlan)", on_stack(r"QueryExecution\.executedPlan")),
    ("plan strings for the SQL listener", on_stack(r"ExplainUtils|generateTreeString")),
    ("Delta writes (WriteIntoDelta)", on_stack(r"WriteIntoDelta\.run")),
    ("Delta MERGE", on_stack(r"MergeIntoCommand")),
    ("Delta commits", on_stack(r"OptimisticTransactionImpl\.commitImpl")),
    ("a Delta table's state rebuilt (computedState)", on_stack(r"Snapshot\.computedState")),
    ("  for row tracking's high watermark", on_stack(r"RowId\$\.extractHighWatermark")),
    ("  for a file pruning's size", on_stack(r"sizeInBytesIfKnown")),
    ("  for an overwrite's domain metadata", on_stack(r"getDomainMetadataFromTransaction")),
    ("Delta scans' file pruning (filesForScan)", on_stack(r"filesForScan")),
    ("local checkpoints (an AUTO CDC batch's changes)", on_stack(r"Dataset\.localCheckpoint")),
    ("micro-batches, outside foreachBatch",
     lambda stack, frames: "MicroBatchExecution" in stack
     and "ForeachBatchSink.addBatch" not in stack),
    ("foreachBatch (the runtime's writes of a batch)", on_stack(r"ForeachBatchSink\.addBatch")),
    ("closures serialized to check them", on_stack(r"SparkClosureCleaner")),
    ("tasks serialized by the DAG scheduler", on_stack(
        r"JavaSerializerInstance\.serialize[\s\S]*DAGScheduler\.submitMissingTasks")),
    ("tasks deserialized by the executors", on_stack(
        r"JavaSerializerInstance\.deserialize[\s\S]*(ResultTask|ShuffleMapTask)\.runTask")),
    ("Hadoop configurations copied or serialized", on_stack(r"hadoop\.conf\.Configuration")),
    ("Java serialization, all", on_stack(r"java\.io\.Object(Out|In)putStream")),
]
THREADS: list[tuple[str, str]] = [
    ("py4j's threads (what Python asks for)", r"^Thread-\d+"),
    ("streaming queries' threads", r"^stream execution thread"),
    ("executor tasks", r"^Executor task"),
    ("the DAG scheduler", r"^dag-scheduler"),
    ("adaptive execution and shuffles",
     r"^(shuffle-exchange|ResultQueryStageExecution|broadcast-exchange)"),
]


def samples(recording: Path, java_home: Path) -> list[tuple[str, list[str]]]:
    """(thread name, frames innermost first) of each execution sample, as `java_home`'s `jfr`
    prints them (the JDK that recorded them)."""
    text = subprocess.run([str(java_home / "bin" / "jfr"), "print", "--stack-depth",
                           str(STACK_DEPTH), "--events", "jdk.ExecutionSample", str(recording)],
                          capture_output=True, text=True, check=True).stdout
    found = []
    for event in text.split("jdk.ExecutionSample {")[1:]:
        thread = re.search(r'sampledThread = "([^"]*)"', event)
        found.append((thread.group(1) if thread else "?",
                      re.findall(r"^\s+([\w$.<>]+)\(", event, re.M)))
    return found


def operations_of(frames: list[str]) -> set[str]:
    stack = "\n".join(frames)
    return {name for name, match in OPERATIONS if match(stack, frames)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--sampled", type=int, default=3, help="the last N updates are sampled")
    parser.add_argument("--keep", type=Path, help="keep the recording and the warehouses here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="session-profile-"))
    root.mkdir(parents=True, exist_ok=True)
    # Read by the `java` launcher spark-submit starts: whole stacks in the recording.
    os.environ["JDK_JAVA_OPTIONS"] = (os.environ.get("JDK_JAVA_OPTIONS", "") +
                                      f" -XX:FlightRecorderOptions:stackdepth={STACK_DEPTH}")
    from exactly_once.local.engine import jvm_processes
    from exactly_once.local.engine.session import build_session
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.settings.pipeline import load_settings

    dump = write_tiny_dump(root / "stream.jsonl")
    settings = load_settings("local", overrides={"exactly_once.source": f"file:{dump}"})
    spark = build_session(root / "session")
    jvm = spark.sparkContext._jvm
    jvm_processes.start_flight_recorder(spark)  # before the JIT's work, which a start discards
    pid = jvm.ProcessHandle.current().pid()
    java_home = Path(jvm.System.getProperty("java.home"))
    recording_path = root / "updates.jfr"
    recording = None
    print(f"commit {commit()}, {args.updates} new-warehouse updates in one session, "
          f"the last {args.sampled} sampled; load {os.getloadavg()[0]:.1f}")
    for n in range(args.updates):
        if n == args.updates - args.sampled:
            configuration = jvm.jdk.jfr.Configuration.getConfiguration("profile")
            recording = jvm.jdk.jfr.Recording(configuration)
            recording.start()
        cpu, wall = jvm_cpu(pid), time.perf_counter()
        run_pipeline(spark, settings, root / f"warehouse-{n}")
        print(f"  update {n + 1}: {time.perf_counter() - wall:6.2f} s, "
              f"JVM CPU {jvm_cpu(pid) - cpu:6.2f} s{'  (sampled)' if recording else ''}",
              flush=True)
        if not args.keep:
            shutil.rmtree(root / f"warehouse-{n}")
    assert recording is not None
    recording.stop()
    recording.dump(jvm.java.io.File(str(recording_path)).toPath())
    recording.close()
    spark.stop()
    found = samples(recording_path, java_home)
    total = len(found)
    print(f"{total} samples; load {os.getloadavg()[0]:.1f}")
    threads: Counter[str] = Counter()
    for thread, _ in found:
        threads[next((name for name, pattern in THREADS if re.search(pattern, thread)),
                     "other threads")] += 1
    print("by thread:")
    for name, count in threads.most_common():
        print(f"  {100 * count / total:5.1f}%  {name}")
    operations: Counter[str] = Counter()
    for _, frames in found:
        operations.update(operations_of(frames))
    print("by operation (a sample counts in every operation on its stack):")
    for name, _ in OPERATIONS:
        print(f"  {100 * operations[name] / total:5.1f}%  {name}")
    if not args.keep:
        shutil.rmtree(root)
    else:
        print(f"recording: {recording_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
