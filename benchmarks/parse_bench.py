"""Benchmark: silver's parse (`transforms.silver.parse_events`) against another commit's, same run.

    .venv/bin/python benchmarks/parse_bench.py [--events 200000] [--rounds 3] [--baseline REV]

The parse is most of what grows with the data in an update (BENCHMARKS.md, "The parse"). One
process and one Spark session: a generated stream (`_common.stream_records`: 20% duplicates,
1% malformed) goes through bronze into a Delta table, read back and cached; then each topic's
records are parsed by this tree's `parse_events` and by `--baseline`'s (its
`src/exactly_once/transforms/silver.py` from git, run against this tree's other modules; by
default the version before the module's last change),
alternating, `--rounds` times each, into Spark's `noop` sink with the session's update settings
(interpreted expressions). Prints the median seconds of each, the ratio, and the commit; and
checks that both give the same rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import baseline_module, commit, previous_version, stream_records, write_bronze

from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.engine import update_settings
from exactly_once.local.engine.session import build_session
from exactly_once.settings.pipeline import load_settings
from exactly_once.transforms import silver

PARSE = "transforms/silver.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=previous_version(PARSE),
                        help="a git revision (default: the parse before its last change)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="parse-bench-"))
    baseline = baseline_module(args.baseline, PARSE, root)
    dump = root / "stream.jsonl"
    write_kcat_jsonl(dump, stream_records(args.events))
    spark = build_session(root / "spark", log_level="OFF")
    write_bronze(spark, dump, root / "bronze")
    bronze = spark.read.format("delta").load(str(root / "bronze")).cache()
    records = bronze.count()
    settings = load_settings("local")
    sides = {"this": silver, f"baseline ({args.baseline})": baseline}
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    print(f"commit {commit()}; {records:,} records; the update's settings "
          f"{update_settings.for_update()}", flush=True)
    with update_settings.applied(spark, update_settings.for_update()):
        for topic in settings.topics.values():  # the same rows from both
            mine, theirs = silver.parse_events(bronze, topic), baseline.parse_events(bronze, topic)
            assert mine.exceptAll(theirs).isEmpty() and theirs.exceptAll(mine).isEmpty(), \
                f"other rows for {topic.kafka_topic} than the baseline's"
        for round_ in range(args.rounds):
            for side in (list(sides) if round_ % 2 == 0 else list(sides)[::-1]):
                started = time.monotonic()
                for topic in settings.topics.values():
                    sides[side].parse_events(bronze, topic).write.format("noop") \
                        .mode("overwrite").save()
                seconds[side].append(time.monotonic() - started)
                print(f"  round {round_ + 1}, {side}: {seconds[side][-1]:.2f}s", flush=True)
    spark.stop()
    this, other = (statistics.median(s) for s in seconds.values())
    print(f"\n| parse of every topic, {records:,} records (median s) | this ({commit()}) | "
          f"{list(sides)[1]} | this / baseline |\n|---|---:|---:|---:|\n"
          f"| | {this:.2f} | {other:.2f} | {this / other:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
