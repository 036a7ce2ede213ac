"""The whole pipeline against a real Kafka broker, run twice with new records in between."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from confluent_kafka import Consumer, TopicPartition
from reference import Delivered, expected_tables

from exactly_once.config import load_settings
from exactly_once.kafka.broker import ensure_topics
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.producer import produce_records
from exactly_once.local.pipeline import run_pipeline

pytestmark = pytest.mark.kafka

START = datetime(2026, 11, 1, tzinfo=timezone.utc)


def consume_all(bootstrap: str, topics: list[str]) -> list[Delivered]:
    """Every record the broker holds, with the partition and offset Kafka gave it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-check",
                         "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(timeout=10)
        records = []
        for topic in topics:
            for partition in metadata.topics[topic].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition))
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, partition, low)])
                while len([r for r in records if (r.topic, r.partition) == (topic, partition)]) \
                        < high - low:
                    for msg in consumer.consume(500, timeout=5):
                        records.append(Delivered(
                            msg.topic(), msg.partition(), msg.offset(),
                            None if msg.key() is None else msg.key().decode(),
                            None if msg.value() is None else msg.value().decode()))
        return records
    finally:
        consumer.close()


def last_event_time(records) -> datetime:
    times = []
    for record in records:
        try:
            times.append(datetime.fromisoformat(
                json.loads(record.payload)["occurred_at"].replace("Z", "+00:00")))
        except (ValueError, KeyError, TypeError):
            continue
    return max(times)


def assert_tables_match(spark, warehouse, delivered: list[Delivered]):
    table = lambda name: spark.read.format("delta").load(str(warehouse / name))  # noqa: E731
    expected = expected_tables(delivered, {"orders": "order_id", "player-rewards": "player_id"})

    bronze = table("bronze_kafka_events").select("topic", "partition", "offset").collect()
    assert sorted(tuple(r) for r in bronze) == sorted(
        (d.topic, d.partition, d.offset) for d in delivered), "bronze keeps every delivery once"

    quarantine = table("quarantine").collect()
    assert sorted((r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]) for r in quarantine) \
        == sorted((d.topic, d.partition, d.offset) for d in expected.quarantined)
    assert all(r["reason"] and r["errors"] for r in quarantine)

    for name, topic in [("silver_orders", "orders"), ("silver_player_rewards", "player-rewards")]:
        ids = [r["event_id"] for r in table(name).select("event_id").collect()]
        assert len(ids) == len(set(ids)), f"{name} holds an event_id twice"
        assert set(ids) == expected.silver_event_ids[topic]

    orders = {r["order_id"]: r for r in table("orders").collect()}
    assert set(orders) == set(expected.orders)
    for order_id, event in expected.orders.items():
        row = orders[order_id]
        assert (row["event_id"], row["sequence"], row["status"], row["customer_id"],
                row["currency"], str(row["amount"])) == (
            event["event_id"], event["sequence"], event["status"], event["customer_id"],
            event["currency"], f"{float(event['amount']):.2f}"), order_id

    xp = {r["player_id"]: r["total_xp"] for r in table("player_xp").collect()}
    assert xp == expected.player_xp
    return expected


def test_two_updates_against_a_real_broker(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    topics = ["orders", "player-rewards"]
    ensure_topics(bootstrap, {topic: 2 for topic in topics})
    settings = load_settings("local", overrides={
        "exactly_once.kafka.bootstrap_servers": bootstrap,
        # small micro-batches, so ordering and dedup are exercised across batch boundaries
        "exactly_once.kafka.max_offsets_per_trigger": "1200",
    })
    warehouse = tmp_path / "warehouse"

    first = generate_stream(GeneratorConfig(events=2000, orders=150, players=40, seed=11,
                                            start=START))
    produce_records(bootstrap, first)
    result = run_pipeline(spark, settings, warehouse)
    delivered = consume_all(bootstrap, topics)
    assert len(delivered) == len(first)
    expected = assert_tables_match(spark, warehouse, delivered)
    assert expected.quarantined and len(expected.orders) < 150  # the stream had bad records
    assert result.total("duplicates_dropped") > 0 and result.total("cdc_stale") > 0

    # New events later in event time, plus exact redeliveries of the first run's records.
    second = generate_stream(GeneratorConfig(
        events=800, orders=150, players=40, seed=12,
        start=last_event_time(first) + timedelta(minutes=1)))
    redelivered = first[::25]
    produce_records(bootstrap, second + redelivered)
    result = run_pipeline(spark, settings, warehouse)
    assert result.flow_input("bronze_kafka_events") == len(second) + len(redelivered), \
        "the second update reads only records it has not seen"
    assert_tables_match(spark, warehouse, consume_all(bootstrap, topics))
