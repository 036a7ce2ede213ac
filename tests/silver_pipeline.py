"""Run the real silver and quarantine flows: the pipeline files that make them, unchanged.

Only bronze, parsed_*, silver_* and quarantine (gold is not what these tests judge, and
every flow costs time), copied into a directory of their own and run by the local runtime on
kcat files: one file and one pipeline update per run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from exactly_once.kafka.kcat import KafkaRecord, write_kcat_jsonl
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.paths import PIPELINES_DIR
from exactly_once.settings.pipeline import load_settings

SILVER_FILES = ["bronze_kafka_events.py", "parsed_orders.py", "parsed_player_rewards.py",
                "silver_orders.py", "silver_player_rewards.py", "quarantine.py"]
TABLES = ["bronze_kafka_events", "silver_orders", "silver_player_rewards", "quarantine"]


def run_silver(spark, runs: list[list[KafkaRecord]], root: Path) -> dict[str, list]:
    """Each run is one kcat file and one update; the tables' rows after the last one."""
    pipelines, inbox, warehouse = root / "pipelines", root / "inbox", root / "warehouse"
    pipelines.mkdir()
    inbox.mkdir()
    for name in SILVER_FILES:
        shutil.copy(PIPELINES_DIR / name, pipelines / name)
    settings = load_settings("local", overrides={"exactly_once.source": f"file:{inbox}/*.jsonl"})
    for i, records in enumerate(runs):
        write_kcat_jsonl(inbox / f"{i}.jsonl", records)
        run_pipeline(spark, settings, warehouse, pipelines_dir=pipelines)
    return {name: spark.read.format("delta").load(str(warehouse / name)).collect()
            for name in TABLES}
