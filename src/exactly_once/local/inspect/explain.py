"""`exactly-once explain`: what happened to every delivery of one key, from Kafka to gold.

`explain_keys` reads the keys' rows from every table of their topic (explain_reads.py), judges
each delivery (verdicts.py) and adds the keys' current rows in each gold table. Nothing here
re-runs the pipeline's logic: the verdicts say what the tables hold. A warehouse, table, key or
event that is not there is an `InspectError` naming what is (checked before anything is read
where it can be: `explainable_topic`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from exactly_once.errors import InspectError
from exactly_once.local.auto_cdc.changes import IS_DELETE, SEQUENCE
from exactly_once.local.auto_cdc.scd2 import START_AT
from exactly_once.local.inspect import preview
from exactly_once.local.inspect.delivery import Delivery, describe_change, sequence_of
from exactly_once.local.inspect.explain_reads import (
    GOLD,
    CurrentStateGold,
    KeyRows,
    LedgerGold,
    Row,
    gold_tables,
    read_key_rows,
)
from exactly_once.local.inspect.gold_verdicts import StoredChange
from exactly_once.local.inspect.verdicts import deliveries_of
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.settings.pipeline import Settings, TopicSettings
from exactly_once.transforms.silver import event_schema

CLOSEST = 5  # keys or event IDs a "not found" line suggests
# Said of a gold row no delivery is left of: bronze keeps every delivery through full refreshes,
# so only a table deleted or rewritten by hand (or an older warehouse) leaves one.
GONE = "bronze_kafka_events included"


@dataclass
class GoldRows:
    """The key's rows in one gold table, with a line saying what they mean."""

    table: str
    summary: str
    rows: list[Row]


@dataclass
class Explanation:
    table: str  # the table asked about
    topic: TopicSettings
    key: str
    deliveries: list[Delivery]  # in log order, each with its verdict
    gold: list[GoldRows]
    versions: dict[str, int]  # the Delta version each table was read at (-1: none yet)
    notes: list[str] = field(default_factory=list)  # what no delivery explains, or no table tells
    event_id: str | None = None  # `--event`: only that event's deliveries are listed


def explainable(settings: Settings) -> dict[str, TopicSettings]:
    """Each table a key can be explained from, with its topic, gold first (bronze and
    quarantine hold both topics: name a table of one)."""
    tables = {}
    for topic in settings.topics.values():
        suffix = topic.dataset_suffix
        if suffix in GOLD:
            for name in [*gold_tables(GOLD[suffix]), f"silver_{suffix}", f"parsed_{suffix}"]:
                tables[name] = topic
    return tables


def explainable_topic(warehouse: Path, settings: Settings, table: str) -> TopicSettings:
    """The topic of `table`, once the warehouse and the table are known to exist."""
    tables = explainable(settings)
    if table not in tables:
        raise InspectError(f"cannot explain a key of `{table}`; explain one of "
                           f"{', '.join(tables)}, or an event with --event")
    preview.require_table(Warehouse(warehouse), table)
    return tables[table]


def require_warehouse(warehouse: Path) -> None:
    if not warehouse.is_dir():
        raise InspectError(f"no warehouse at {warehouse}; run `exactly-once run` first")


def explain_keys(spark: SparkSession, warehouse: Path, settings: Settings, table: str,
                 keys: list[str]) -> list[Explanation]:
    """One explanation per key (keys of `table`'s topic), read together: one filtered read of
    each table for all of them."""
    topic = explainable_topic(warehouse, settings, table)
    rows = read_key_rows(spark, Warehouse(warehouse), topic, keys)
    return [_explanation(rows, table, key) for key in keys]


def explain_key(spark: SparkSession, warehouse: Path, settings: Settings, table: str,
                key: str) -> Explanation:
    (explanation,) = explain_keys(spark, warehouse, settings, table, [key])
    if not explanation.deliveries and not any(g.rows for g in explanation.gold):
        raise InspectError(_no_key(spark, warehouse, explanation.topic, key))
    return explanation


def explain_event(spark: SparkSession, warehouse: Path, settings: Settings,
                  event_id: str) -> Explanation:
    """The deliveries of one event (found in any topic), with its key's gold rows."""
    require_warehouse(warehouse)
    wh = Warehouse(warehouse)
    for topic in settings.topics.values():
        if topic.dataset_suffix not in GOLD:
            continue
        keys = _keys_of_event(spark, wh, topic, event_id)
        if keys:
            key = keys[0]
            rows = read_key_rows(spark, wh, topic, [key], event_ids=[event_id])
            explanation = _explanation(rows, f"silver_{topic.dataset_suffix}", key)
            explanation.event_id = event_id
            explanation.deliveries = [d for d in explanation.deliveries
                                      if d.event.get("event_id") == event_id]
            return explanation
    raise InspectError(_no_event(spark, wh, settings, event_id))


def _keys_of_event(spark: SparkSession, warehouse: Warehouse, topic: TopicSettings,
                   event_id: str) -> list[str]:
    """The keys an event names (or was delivered under), from the first table that holds it,
    upstream first; gold last, for an event no delivery is left of."""
    suffix, entity = topic.dataset_suffix, topic.key
    named = F.col(entity)
    places = [(f"parsed_{suffix}", [named, F.col("kafka_key")]), (f"silver_{suffix}", [named])]
    gold = GOLD[suffix]
    if isinstance(gold, LedgerGold):
        places += [(gold.ledger, [named]),
                   (gold.late, [F.get_json_object("event", f"$.{entity}")])]
    else:
        places += [(gold.current, [named]), (gold.history, [named])]
    for table, columns in places:
        path = warehouse.table_path(table)
        if not delta_log.is_delta_table(path):
            continue
        rows = spark.read.format("delta").load(str(path.resolve())) \
            .where(F.col("event_id") == event_id).select(*columns).collect()
        found = list(dict.fromkeys(v for row in rows for v in row if v is not None))
        if found:
            return found
    return []


def _explanation(rows: KeyRows, table: str, key: str) -> Explanation:
    topic = rows.topic
    fields = [f.name for f in event_schema(topic)]
    deliveries = deliveries_of(rows, key, fields)
    gold, notes = _gold_rows(rows, key, deliveries)
    return Explanation(table, topic, key, deliveries, gold, dict(rows.versions), notes)


def _gold_rows(rows: KeyRows, key: str, deliveries: list[Delivery]) \
        -> tuple[list[GoldRows], list[str]]:
    topic, gold = rows.topic, rows.gold
    entity = topic.key
    delivered_ids = {d.event.get("event_id") for d in deliveries}
    notes: list[str] = []
    out: list[GoldRows] = []
    if isinstance(gold, CurrentStateGold):
        seq_by = topic.sequence_by

        def rank(value: Any) -> tuple:
            return tuple(value[c] for c in seq_by)

        current = [r for r in rows.gold_rows.get(gold.current, []) if r.get(entity) == key]
        stored = max((StoredChange(rank(r[SEQUENCE]), r[IS_DELETE]) for r in
                      rows.state_rows.get(gold.current, []) if r.get(entity) == key),
                     default=None)
        if current:
            at = describe_change(sequence_of(current[0], seq_by), seq_by)
            summary = f"the current row, at {at}"
        elif stored is not None and stored.deleted:
            at = describe_change(stored.rank, seq_by)
            summary = f"no row: deleted at {at}; the tombstone keeps older events out"
        else:
            summary = "no row yet"
        out.append(GoldRows(gold.current, summary, current))
        versions = sorted((r for r in rows.gold_rows.get(gold.history, [])
                           if r.get(entity) == key), key=lambda r: rank(r[START_AT]))
        current_version = any(v.get("__END_AT") is None for v in versions)
        out.append(GoldRows(gold.history, "no versions yet" if not versions else
                            f"{len(versions)} version{'' if len(versions) == 1 else 's'}, "
                            + ("the last one current" if current_version else "none current"),
                            versions))
        delivered = {sequence_of(d.event, seq_by) for d in deliveries if d.event}
        for table in (gold.current, gold.history):
            for applied in sorted({rank(r[SEQUENCE]) for r in rows.state_rows.get(table, [])
                                   if r.get(entity) == key} - delivered):
                notes.append(f"{table} applied {describe_change(applied, seq_by)}, but no "
                             f"table holds a delivery of it any more ({GONE})")
    else:
        ledger = sorted((r for r in rows.gold_rows.get(gold.ledger, [])
                         if r.get(entity) == key),
                        key=lambda r: (r.get("occurred_at") is None, r.get("occurred_at"),
                                       r["event_id"]))
        totals = [r for r in rows.gold_rows.get(gold.totals, []) if r.get(entity) == key]
        late = sorted((r for r in rows.gold_rows.get(gold.late, [])
                       if r["event_id"] in delivered_ids or key in (r.get("event") or "")),
                      key=lambda r: r["event_id"])
        out.append(GoldRows(gold.ledger, f"{len(ledger)} grant{'' if len(ledger) == 1 else 's'}"
                            " applied, each event once", ledger))
        total = totals[0] if totals else None
        out.append(GoldRows(gold.totals, f"total {total['total_xp']:,} XP from "
                            f"{total['xp_events']} grants" if total else "no row", totals))
        out.append(GoldRows(gold.late, f"{len(late)} event{'' if len(late) == 1 else 's'} kept "
                            "aside, not applied", late))
        for row in ledger:
            if row["event_id"] not in delivered_ids:
                notes.append(f"{gold.ledger} holds event {row['event_id']}, but no table holds "
                             f"a delivery of it any more ({GONE})")
    return out, notes


def _closest(word: str, candidates: list[str]) -> str:
    near = difflib.get_close_matches(word, candidates, n=CLOSEST, cutoff=0.5)
    return f"; the closest: {', '.join(near)}" if near else ""


def _no_key(spark: SparkSession, warehouse: Path, topic: TopicSettings, key: str) -> str:
    """The "no such key" line: how many keys the topic has, their range, the closest ones."""
    parsed = Warehouse(warehouse).table_path(f"parsed_{topic.dataset_suffix}")
    keys = sorted(r[0] for r in spark.read.format("delta").load(str(parsed.resolve()))
                  .select("kafka_key").where(F.col("kafka_key").isNotNull()).distinct().collect()) \
        if delta_log.is_delta_table(parsed) else []
    where = f"no delivery of {topic.key} `{key}` in {warehouse}"
    if not keys:
        return f"{where}: topic {topic.kafka_topic} has no records there yet"
    return (f"{where}; topic {topic.kafka_topic} has {len(keys):,} keys, from {keys[0]} to "
            f"{keys[-1]}{_closest(key, keys)}")


def _no_event(spark: SparkSession, warehouse: Warehouse, settings: Settings,
              event_id: str) -> str:
    ids: list[str] = []
    for topic in settings.topics.values():
        parsed = warehouse.table_path(f"parsed_{topic.dataset_suffix}")
        if delta_log.is_delta_table(parsed):
            ids += [r[0] for r in spark.read.format("delta").load(str(parsed.resolve()))
                    .select("event_id").where(F.col("event_id").isNotNull()).distinct()
                    .collect()]
    if not ids:
        return f"no event `{event_id}` in {warehouse.root}: it has no events yet"
    return (f"no event `{event_id}` in {warehouse.root}; it has {len(set(ids)):,} event IDs"
            f"{_closest(event_id, sorted(set(ids)))}")
