"""Transactions: gold is a function of the *committed* log, whatever aborted transactions left.

Exactly-once producers (Kafka Streams, Flink's exactly-once sink, Connect's exactly-once
sources) write in transactions. An aborted transaction's records stay in the log, followed by
an abort marker; a reader in `read_committed` skips them, a reader in `read_uncommitted` (Kafka's
default) delivers them as if they had happened. Here a real transactional producer writes
committed and aborted transactions, interleaved, to the project's broker; the aborted ones carry
valid events (later states of real orders, a delete, new XP grants, and one batch that a later
committed transaction re-sends, as a retrying Kafka Streams task does). Micro-batches of a few
offsets cut through transactions. Bronze must hold exactly the committed records, gold must equal
the reference model of them.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from events import ORDERS, REWARDS, Clock, Event, grant, order
from reference import (
    Delivered,
    current_orders,
    late_events,
    order_history,
    quarantined_offsets,
    xp_ledger,
    xp_totals,
)

from exactly_once.kafka.admin import client_config, ensure_topics
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.settings.pipeline import load_settings

pytestmark = pytest.mark.kafka

CLOCK = Clock.ago(minutes=30)
# Offsets per micro-batch, over both topics' partitions: transactions are 2-4 records plus a
# marker per partition, so most batch boundaries fall inside one.
MAX_OFFSETS_PER_TRIGGER = 6


@dataclass(frozen=True)
class Transaction:
    records: list[dict]  # events, each sent to its topic under its entity's key (`Event.of`)
    commit: bool


# Published to the test's own topics.
RETRIED = [order("o2-2", "o2", 2, status="packed", amount="21.00",
                 occurred_at=CLOCK.at(minutes=4)),
           grant("g2", "p1", 100, occurred_at=CLOCK.at(minutes=4))]
TRANSACTIONS = [
    Transaction([order("o1-1", "o1", 1, event_type="order_created", status="created",
                       occurred_at=CLOCK.at(minutes=0)),
                 order("o2-1", "o2", 1, event_type="order_created", status="created",
                       occurred_at=CLOCK.at(minutes=0)),
                 grant("g1", "p1", 10, occurred_at=CLOCK.at(minutes=0)),
                 order("o3-1", "o3", 1, event_type="order_created", status="created",
                       occurred_at=CLOCK.at(minutes=1))],
                commit=True),
    # Later states of real orders, a delete, new grants (one for a player nobody committed):
    # none of it happened.
    Transaction([order("o1-2x", "o1", 2, status="shipped", amount="99.00",
                       occurred_at=CLOCK.at(minutes=2)),
                 order("o2-del", "o2", 2, event_type="order_deleted",
                       occurred_at=CLOCK.at(minutes=2)),
                 grant("g3", "p3", 7, occurred_at=CLOCK.at(minutes=2)), *RETRIED], commit=False),
    Transaction([order("o1-2", "o1", 2, status="paid", occurred_at=CLOCK.at(minutes=3)),
                 grant("g4", "p2", 5, occurred_at=CLOCK.at(minutes=3))],
                commit=True),
    Transaction([order("o3-del", "o3", 2, event_type="order_deleted",
                       occurred_at=CLOCK.at(minutes=4)),
                 order("o1-3x", "o1", 3, event_type="order_cancelled", status="cancelled",
                       occurred_at=CLOCK.at(minutes=4)),
                 grant("g5", "p2", 50, occurred_at=CLOCK.at(minutes=4))], commit=False),
    # The retry: the aborted transaction's own records, byte for byte, committed this time.
    Transaction(RETRIED, commit=True),
    # The log ends with an aborted transaction: its marker is the partitions' last offset.
    Transaction([order("o2-3x", "o2", 3, status="cancelled", occurred_at=CLOCK.at(minutes=6)),
                 grant("g6", "p1", 1000, occurred_at=CLOCK.at(minutes=6))], commit=False),
]


def collect_into(delivered: list[Delivered]):
    """A delivery callback that records where the log stored each record."""
    def on_delivery(error: KafkaError | None, message: Message) -> None:
        assert error is None, error
        delivered.append(Delivered(message.topic(), message.partition(), message.offset(),
                                   message.key().decode(), message.value().decode(),
                                   message.timestamp()[1]))
    return on_delivery


def publish(bootstrap: str, topics: dict[str, str], transactions: list[Transaction]) \
        -> list[tuple[Transaction, list[Delivered]]]:
    """Each transaction as the log stored it: its records with their offsets and timestamps.

    The records are flushed to the broker before the transaction ends, so an aborted
    transaction's records are in the log (followed by its abort marker), as when a producer
    fails after writing.
    """
    producer = Producer(client_config(bootstrap, **{
        "transactional.id": f"test-transactions-{uuid.uuid4().hex[:8]}",
        "acks": "all",
        "partitioner": "murmur2_random",
    }))
    producer.init_transactions(30)
    stored: list[tuple[Transaction, list[Delivered]]] = []
    for transaction in transactions:
        delivered: list[Delivered] = []
        producer.begin_transaction()
        for event in map(Event.of, transaction.records):
            producer.produce(topics[event.topic], key=event.key.encode(),
                             value=event.payload.encode(), on_delivery=collect_into(delivered))
        assert producer.flush(30) == 0
        if transaction.commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        stored.append((transaction, delivered))
    return stored


def batch_ends(warehouse: Path, flow: str) -> list[dict[tuple[str, int], int]]:
    """The end offsets of each micro-batch the flow's Kafka source planned (its checkpoint's
    offset log: one file per batch, the source's offsets as JSON on its last line)."""
    offsets = Warehouse(warehouse).checkpoint_path(flow) / "offsets"
    ends = []
    for batch in sorted((p for p in offsets.iterdir() if p.name.isdigit()),
                        key=lambda p: int(p.name)):
        source = json.loads(batch.read_text().splitlines()[-1])
        ends.append({(topic, int(partition)): offset
                     for topic, partitions in source.items()
                     for partition, offset in partitions.items()})
    return ends


def straddled(stored: list[tuple[Transaction, list[Delivered]]],
              ends: list[dict[tuple[str, int], int]]) -> int:
    """How many transactions a micro-batch boundary cuts: some of a transaction's offsets on a
    partition (its records, or its marker right after them) fall in one batch, some in the next."""
    cut = 0
    for _, delivered in stored:
        spans: dict[tuple[str, int], list[int]] = {}
        for d in delivered:
            spans.setdefault((d.topic, d.partition), []).append(d.offset)
        if any(min(offsets) < end[where] <= max(offsets) + 1  # + 1: the marker
               for where, offsets in spans.items() for end in ends if where in end):
            cut += 1
    return cut


def table(spark, warehouse: Path, name: str) -> list:
    return read_latest(spark, str(warehouse / name)).collect()


def rank(struct) -> tuple | None:
    return None if struct is None else (struct["sequence"], struct["event_id"])


def test_only_committed_transactions_reach_bronze_and_gold(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    suffix = uuid.uuid4().hex[:8]
    topics = {ORDERS: f"tx-orders-{suffix}", REWARDS: f"tx-rewards-{suffix}"}
    ensure_topics(bootstrap, dict.fromkeys(topics.values(), 1))
    stored = publish(bootstrap, topics, TRANSACTIONS)
    committed = [d for transaction, delivered in stored if transaction.commit for d in delivered]
    aborted = [d for transaction, delivered in stored if not transaction.commit for d in delivered]
    assert aborted and all(d.offset >= 0 for d in aborted), "aborted records are in the log"

    settings = load_settings("local", overrides={
        "exactly_once.kafka.bootstrap_servers": bootstrap,
        "exactly_once.kafka.max_offsets_per_trigger": str(MAX_OFFSETS_PER_TRIGGER),
        "exactly_once.topics.orders.topic": topics[ORDERS],
        "exactly_once.topics.player_rewards.topic": topics[REWARDS],
    })
    warehouse = tmp_path / "warehouse"
    run_pipeline(spark, settings, warehouse)
    assert straddled(stored, batch_ends(warehouse, "bronze_kafka_events")) >= 2, \
        "micro-batch boundaries cut through transactions"

    bronze = sorted((r["topic"], r["partition"], r["offset"])
                    for r in table(spark, warehouse, "bronze_kafka_events"))
    assert bronze == sorted((d.topic, d.partition, d.offset) for d in committed), \
        "bronze holds the committed records, once each: no aborted record, no marker"

    entity = {topics[ORDERS]: "order_id", topics[REWARDS]: "player_id"}
    assert not quarantined_offsets(committed, entity)
    assert not table(spark, warehouse, "quarantine")
    orders, rewards = topics[ORDERS], topics[REWARDS]
    assert {r["order_id"]: (r["event_id"], r["sequence"], r["status"])
            for r in table(spark, warehouse, "orders")} == {
        key: (e["event_id"], e["sequence"], e["status"])
        for key, e in current_orders(committed, orders).items()}, "orders"
    assert sorted((r["order_id"], rank(r["__START_AT"]), rank(r["__END_AT"]), r["status"])
                  for r in table(spark, warehouse, "orders_history")) == sorted(
        (v.order_id, v.start, v.end, v.event["status"])
        for v in order_history(committed, orders)), "orders_history"
    ledger = xp_ledger(committed, rewards)
    assert sorted((r["event_id"], r["player_id"], r["xp"])
                  for r in table(spark, warehouse, "player_xp_ledger")) == sorted(
        (event_id, e["player_id"], e["xp"]) for event_id, e in ledger.items()), "ledger"
    assert {r["player_id"]: (r["total_xp"], r["xp_events"])
            for r in table(spark, warehouse, "player_xp")} == xp_totals(ledger), "player_xp"
    assert not table(spark, warehouse, "late_events") and not late_events(committed, rewards)
