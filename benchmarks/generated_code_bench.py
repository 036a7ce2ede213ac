"""Benchmark: a large micro-batch's expressions as generated code (`update_settings.
batch_expressions`) against interpreted, as every batch ran before.

    .venv/bin/python benchmarks/generated_code_bench.py [--events 200000] [--pairs 2]
        [--sizes 200,1000,4000,16000,64000] [--rounds 5]

Two parts, each measured against its baseline in the same run:
- sizes: in one warm session, silver's parse of `--sizes` bronze rows and its Delta append, each
  way alternated (`--rounds`, the first not counted): the driver JVM's CPU, medians, and the
  bytes Spark estimates the batch reads (what the threshold compares). Where generated code
  starts to pay is where GENERATED_CODE_FROM_BYTES belongs.
- process: `--events` events end to end as an `exactly-once run` process into a new warehouse
  (the throughput row of update_cost_bench.py), this tree against the same tree with the
  threshold out of reach (no batch generated), alternated `--pairs` times: wall seconds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, commit, driver_pid, jvm_cpu, stream_records, write_bronze

from exactly_once.kafka.kcat import write_kcat_jsonl

NEVER = ("import exactly_once.local.engine.update_settings as s; "
         "s.GENERATED_CODE_FROM_BYTES = 1 << 62")
RUN = "import sys; {patch}; from exactly_once.cli import main; sys.argv[0] = 'exactly-once'; " \
      "sys.exit(main())"


def sizes(root: Path, dump: Path, rows: list[int], rounds: int) -> None:
    from exactly_once.local.engine import update_settings
    from exactly_once.local.engine.session import build_session
    from exactly_once.settings.pipeline import load_settings
    from exactly_once.transforms import silver

    spark = build_session(root / "spark", log_level="OFF")
    pid = driver_pid(spark)
    write_bronze(spark, dump, root / "bronze")
    bronze = spark.read.format("delta").load(str(root / "bronze"))
    tables = {}
    for n in rows:
        bronze.limit(n).write.format("delta").save(str(root / f"bronze_{n}"))
        tables[n] = spark.read.format("delta").load(str(root / f"bronze_{n}"))
    topic = load_settings("local").topics["orders"]
    ways = {"interpreted": update_settings.for_update(),
            "generated": {update_settings.FACTORY_MODE: "FALLBACK"}}
    cpu: dict[tuple[int, str], list[float]] = {(n, w): [] for n in rows for w in ways}
    written = 0
    for round_ in range(rounds):
        for n in rows:
            for way in (list(ways) if round_ % 2 == 0 else list(ways)[::-1]):
                with update_settings.applied(spark, ways[way]):
                    written += 1
                    before = jvm_cpu(pid)
                    silver.parse_events(tables[n], topic).write.format("delta") \
                        .save(str(root / f"parsed_{written}"))
                    if round_:
                        cpu[(n, way)].append(jvm_cpu(pid) - before)
    print("\n| bronze rows | bytes read (Spark's estimate) | interpreted, JVM CPU s | "
          "generated | generated / interpreted |\n|---:|---:|---:|---:|---:|")
    for n in rows:
        read = update_settings.input_bytes(tables[n])
        interpreted, generated = (statistics.median(cpu[(n, w)]) for w in ways)
        print(f"| {n:,} | {read:,} | {interpreted:.3f} | {generated:.3f} | "
              f"{generated / interpreted:.2f} |")
    spark.stop()


def process(root: Path, dump: Path, events: int, pairs: int) -> None:
    seconds: dict[str, list[float]] = {"generated": [], "never": []}
    for i in range(pairs):
        for way in (("generated", "never") if i % 2 == 0 else ("never", "generated")):
            warehouse = root / f"warehouse_{way}_{i}"
            code = RUN.format(patch=NEVER if way == "never" else "pass")
            began = time.monotonic()
            subprocess.run([sys.executable, "-c", code, "run", "--quiet", "--source",
                            f"file:{dump}", "--warehouse", str(warehouse)], cwd=REPO,
                           check=True, capture_output=True)
            seconds[way].append(time.monotonic() - began)
            print(f"  {way}: {seconds[way][-1]:.1f}s", flush=True)
    generated, never = (statistics.mean(seconds[w]) for w in ("generated", "never"))
    print(f"\n| {events:,} events, process (mean of {pairs}) | generated for large batches | "
          f"interpreted | ratio |\n|---|---:|---:|---:|\n"
          f"| wall s | {generated:.1f} | {never:.1f} | {generated / never:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--sizes", default="200,1000,4000,16000,64000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parts", default="sizes,process")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="generated-code-bench-"))
    dump = root / "stream.jsonl"
    write_kcat_jsonl(dump, stream_records(args.events))
    print(f"commit {commit()}; {args.events:,} events")
    if "sizes" in args.parts:
        sizes(root, dump, [int(n) for n in args.sizes.split(",")], args.rounds)
    if "process" in args.parts:
        process(root, dump, args.events, args.pairs)


if __name__ == "__main__":
    main()
