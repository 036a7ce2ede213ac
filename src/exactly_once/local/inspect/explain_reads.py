"""The rows of a few keys, read from every table that holds something of them: the evidence
`exactly-once explain` judges (verdicts.py).

Each table is read with a filter on the keys (or on the deliveries' coordinates or event IDs),
never whole: Delta skips the files whose statistics exclude them, Parquet the row groups. Each
is read at one committed version, pinned before any is read and downstream first (gold, then
the silver checkpoint, silver, quarantine, parsed, bronze). An update may commit in between, but
a table read later is at least as new as those read before it, so whatever a downstream table
holds, its upstream rows are there too: a delivery is at worst "not read yet", never
contradicted.

The gold tables of each topic are the pipeline's (pipelines/gold_*, late_events.py), named
in `GOLD`; tests/test_explain.py checks them against the declared graph.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.local.storage import delta_log
from exactly_once.local.storage.files import StoragePath
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.settings.pipeline import TopicSettings
from exactly_once.transforms.silver import ARRIVED_LATE, arrived_late

BRONZE = "bronze_kafka_events"
READERS = 4  # tables read at once
QUARANTINE = "quarantine"
Row = dict[str, Any]


@dataclass(frozen=True)
class CurrentStateGold:
    """An entity's state by sequence: AUTO CDC SCD1 (`current`) and SCD2 (`history`) targets
    keyed by the topic's key, with their state tables (SCD1 key log, SCD2 journal)."""

    current: str
    history: str


@dataclass(frozen=True)
class LedgerGold:
    """Additive effects: each event once in `ledger` (keyed by event_id), summed per key in
    `totals`; events that arrived too late kept aside in `late` (keyed by event_id)."""

    ledger: str
    totals: str
    late: str


Gold = CurrentStateGold | LedgerGold
# What each topic (its `dataset_suffix`) reaches in gold, as the pipeline files declare it.
GOLD: dict[str, Gold] = {
    "orders": CurrentStateGold(current="orders", history="orders_history"),
    "player_rewards": LedgerGold(ledger="player_xp_ledger", totals="player_xp",
                                 late="late_events"),
}


def gold_tables(gold: Gold) -> list[str]:
    if isinstance(gold, CurrentStateGold):
        return [gold.current, gold.history]
    return [gold.ledger, gold.totals, gold.late]


@dataclass
class KeyRows:
    """What the tables hold of some keys of one topic: plain rows, and the versions read."""

    topic: TopicSettings
    gold: Gold
    versions: dict[str, int]  # table (or `<target> state`) -> Delta version read; -1: none
    bronze: list[Row] = field(default_factory=list)
    parsed: list[Row] = field(default_factory=list)
    quarantine: list[Row] = field(default_factory=list)
    silver: list[Row] = field(default_factory=list)
    # Silver's watermark after its last committed micro-batch (epoch ms of `ingested_at`);
    # None when silver has no committed batch.
    silver_watermark_ms: int | None = None
    gold_rows: dict[str, list[Row]] = field(default_factory=dict)  # table -> rows
    state_rows: dict[str, list[Row]] = field(default_factory=dict)  # AUTO CDC target -> state


class _Pinned:
    """Each table's latest committed version, taken in the order asked (downstream first)."""

    def __init__(self, spark: SparkSession, warehouse: Warehouse):
        self.spark, self.warehouse = spark, warehouse
        self.versions: dict[str, int] = {}
        self._paths: dict[str, StoragePath] = {}

    def pin(self, name: str, path: StoragePath) -> None:
        self._paths[name] = path
        self.versions[name] = delta_log.latest_version(path)

    def read(self, name: str) -> DataFrame | None:
        """The table at its pinned version; None when it had none (not created yet)."""
        version = self.versions[name]
        if version < 0:
            return None
        return self.spark.read.format("delta").option("versionAsOf", version) \
            .load(str(self._paths[name].resolve()))


def state_name(target: str) -> str:
    return f"{target} state"


def silver_watermark_ms(checkpoint: StoragePath) -> int | None:
    """`nextBatchWatermarkMs` of the checkpoint's last committed batch: Structured Streaming's
    commit log (`commits/<batch>`: a version line, then JSON)."""
    commits = checkpoint / "commits"
    batches = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) \
        if commits.is_dir() else []
    if not batches:
        return None
    lines = (commits / str(batches[-1])).read_text(encoding="utf-8").splitlines()
    value = json.loads(lines[1]).get("nextBatchWatermarkMs") if len(lines) > 1 else None
    return None if value is None else int(value)


def _collect(df: DataFrame | None, where: Column) -> list[Row]:
    return [] if df is None else [r.asDict(recursive=True) for r in df.where(where).collect()]


def read_key_rows(spark: SparkSession, warehouse: Warehouse, topic: TopicSettings,
                  keys: list[str], event_ids: list[str] | None = None) -> KeyRows:
    """The rows of `keys` (the topic's key: Kafka key, or the event's entity field) in every
    table of the topic; `event_ids`: also the deliveries of these events, whatever their key."""
    suffix, entity = topic.dataset_suffix, topic.key
    gold = GOLD[suffix]
    parsed_name, silver_name = f"parsed_{suffix}", f"silver_{suffix}"
    pinned = _Pinned(spark, warehouse)
    targets = [gold.current, gold.history] if isinstance(gold, CurrentStateGold) else []
    for name in gold_tables(gold):
        pinned.pin(name, warehouse.table_path(name))
    for target in targets:
        pinned.pin(state_name(target), warehouse.auto_cdc_state_path(target))
    watermark = silver_watermark_ms(warehouse.checkpoint_path(silver_name))
    for name in (silver_name, QUARANTINE, parsed_name, BRONZE):
        pinned.pin(name, warehouse.table_path(name))

    wanted = [F.lit(k) for k in keys]
    parsed_filter = F.col("kafka_key").isin(*wanted) | F.col(entity).isin(*wanted)
    if event_ids:
        parsed_filter = parsed_filter | F.col("event_id").isin(*event_ids)
    parsed_df = pinned.read(parsed_name)
    if parsed_df is not None and topic.max_event_age:  # silver's own column, its own function
        parsed_df = parsed_df.withColumn(ARRIVED_LATE, arrived_late(topic.max_event_age))
    parsed = _collect(parsed_df, parsed_filter)
    # Deliveries of the keys under another Kafka key (or none): found by their offsets (or, a
    # record without coordinates, by its Kafka timestamp); verdicts.py matches them exactly.
    elsewhere = [r for r in parsed if r["kafka_key"] not in keys]
    offsets = sorted({r["kafka_offset"] for r in elsewhere if r["kafka_offset"] is not None})
    stamps = sorted({r["kafka_timestamp"] for r in elsewhere if r["kafka_offset"] is None
                     and r["kafka_timestamp"] is not None})

    def at(offset: str, timestamp: str) -> Column:
        found = F.col(offset).isin(*offsets) if offsets else F.lit(False)
        if stamps:
            found = found | (F.col(offset).isNull() & F.col(timestamp).isin(*stamps))
        return found

    silver_filter = F.col(entity).isin(*wanted)
    ids = sorted({r["event_id"] for r in parsed if r.get("event_id")} | set(event_ids or ()))
    if event_ids:
        silver_filter = silver_filter | F.col("event_id").isin(*event_ids)
    reads: dict[str, tuple[str, Column]] = {
        BRONZE: (BRONZE, (F.col("topic") == topic.kafka_topic) & (
            F.col("key").isin(*[F.lit(bytearray(k.encode())) for k in keys])
            | at("offset", "timestamp"))),
        QUARANTINE: (QUARANTINE, (F.col("source_topic") == suffix) & (
            F.col("kafka_key").isin(*wanted)
            | at("kafka_offset", "kafka_timestamp"))),
        silver_name: (silver_name, silver_filter),
    }
    if isinstance(gold, CurrentStateGold):
        for target in targets:
            reads[target] = (target, F.col(entity).isin(*wanted))
            reads[state_name(target)] = (state_name(target), F.col(entity).isin(*wanted))
    else:
        reads[gold.ledger] = (gold.ledger, F.col(entity).isin(*wanted))
        reads[gold.totals] = (gold.totals, F.col(entity).isin(*wanted))
        # Keyed by event_id; the key is inside the event's JSON.
        reads[gold.late] = (gold.late, F.col("event_id").isin(*[F.lit(i) for i in ids])
                            | F.get_json_object("event", f"$.{entity}").isin(*wanted))
    # Each read is a small Spark job whose time is mostly planning and Delta's snapshot, not
    # data: run side by side (the versions are pinned, so their order does not matter).
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        found = dict(zip(reads, pool.map(lambda read: _collect(pinned.read(read[0]), read[1]),
                                         reads.values()), strict=True))
    rows = KeyRows(topic, gold, pinned.versions, silver_watermark_ms=watermark,
                   bronze=found[BRONZE], parsed=parsed, quarantine=found[QUARANTINE],
                   silver=found[silver_name])
    for name in gold_tables(gold):
        rows.gold_rows[name] = found[name]
    for target in targets:
        rows.state_rows[target] = found[state_name(target)]
    return rows
