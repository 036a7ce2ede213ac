"""What the crash tests share: a tiny dump, the tables an interrupted run must end with, and
where on disk each table of the warehouse keeps its files.

A trial compares column sets, not whole rows: arrival and processing times (`ingested_at`,
`quarantined_at`, tombstone times) naturally differ between two runs of the same log.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
from exactly_once.local.registry import PipelineGraph
from exactly_once.local.warehouse import PIPELINE_DIR, Warehouse

TABLES = {  # table -> columns that must match (arrival times naturally differ between runs)
    "bronze_kafka_events": ["topic", "partition", "offset", "key", "value"],
    "parsed_orders": ["kafka_offset", "event_id", "value_sha256", "errors"],
    "parsed_player_rewards": ["kafka_offset", "event_id", "errors"],
    "silver_orders": ["event_id", "sequence", "status", "kafka_offset"],
    "silver_player_rewards": ["event_id", "xp", "kafka_offset"],
    "quarantine": ["kafka_topic", "kafka_offset", "reason"],
    "orders": ["order_id", "event_id", "sequence", "status", "amount"],
    "orders_history": ["order_id", "status", "amount", "__START_AT", "__END_AT"],
    "player_xp_ledger": ["event_id", "player_id", "xp"],
    "player_xp": ["player_id", "total_xp", "xp_events"],
    "late_events": ["event_id", "reason"],
}
EVENT_LOG = "event_log"
LOCK = f"{PIPELINE_DIR}/lock"


def write_tiny_dump(path: Path) -> Path:
    """About two dozen records of both topics, with redeliveries, out-of-order sequences,
    deletes and malformed records: every flow writes rows, in one micro-batch each."""
    write_kcat_jsonl(path, as_consumed(generate_stream(GeneratorConfig(
        events=16, orders=4, players=3, seed=21, delete_rate=0.2, malformed_rate=0.1))))
    return path


def contents(spark: SparkSession, warehouse: Path) -> dict[str, list]:
    return {table: sorted(map(tuple, spark.read.format("delta").load(str(warehouse / table))
                              .select(*columns).collect()))
            for table, columns in TABLES.items()}


def table_dirs(graph: PipelineGraph, warehouse: Warehouse, table: str) -> list[Path]:
    """Every directory the runtime keeps for `table`: the table, its flows' checkpoints and
    its AUTO CDC state and rejected rows."""
    return [warehouse.table_path(table), warehouse.auto_cdc_state_path(table),
            warehouse.auto_cdc_rejected_path(table),
            *(warehouse.checkpoint_path(flow.name) for flow in graph.flows_into(table))]


def owner(graph: PipelineGraph, warehouse: Warehouse, relative: str) -> str | None:
    """The table whose directories hold the file at `relative` (a path inside the warehouse);
    None for the event log and the lock, which belong to the update itself."""
    path = warehouse.root / relative
    for table in (t.name for t in graph.tables()):
        if any(path == d or d in path.parents for d in table_dirs(graph, warehouse, table)):
            return table
    return None
