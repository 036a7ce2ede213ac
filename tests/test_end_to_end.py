"""The whole pipeline against a real Kafka broker, run twice with new records in between."""

from __future__ import annotations

import json
import shutil
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from confluent_kafka import Consumer, TopicPartition
from reference import Delivered, expected_tables, order_history, rank_of, xp_ledger

from exactly_once.kafka.admin import ensure_topics
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.producer import produce_records
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.services import broker
from exactly_once.settings.pipeline import Settings, load_settings

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
                position = low
                while position < high:
                    # At most what is left: `consume` waits out its timeout until it has
                    # `num_messages`, so asking for more than the partition holds costs 5 s.
                    batch = consumer.consume(min(500, high - position), timeout=5)
                    # Past the batch (and any transaction marker, which takes an offset).
                    position = max(position, consumer.position(
                        [TopicPartition(topic, partition)])[0].offset)
                    for msg in batch:
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


def assert_tables_match(spark, warehouse, delivered: list[Delivered],
                        orders_topic: str = "orders", rewards_topic: str = "player-rewards"):
    table = lambda name: read_latest(spark, str(warehouse / name))  # noqa: E731
    expected = expected_tables(delivered, {orders_topic: "order_id", rewards_topic: "player_id"})

    bronze = table("bronze_kafka_events").select("topic", "partition", "offset").collect()
    assert sorted(tuple(r) for r in bronze) == sorted(
        (d.topic, d.partition, d.offset) for d in delivered), "bronze keeps every delivery once"

    quarantine = table("quarantine").collect()
    assert sorted((r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]) for r in quarantine) \
        == sorted((d.topic, d.partition, d.offset) for d in expected.quarantined)
    assert all(r["reason"] and r["errors"] for r in quarantine)

    for name, topic in [("silver_orders", orders_topic), ("silver_player_rewards", rewards_topic)]:
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

    history = table("orders_history").collect()
    assert sorted((r["order_id"], rank_of(r["__START_AT"]), rank_of(r["__END_AT"]), r["event_id"])
                  for r in history) == sorted((v.order_id, v.start, v.end, v.event["event_id"])
                                              for v in order_history(delivered, orders_topic))

    ledger = table("player_xp_ledger").collect()
    assert sorted((r["event_id"], r["player_id"], r["xp"]) for r in ledger) == sorted(
        (event_id, e["player_id"], e["xp"])
        for event_id, e in xp_ledger(delivered, rewards_topic).items())
    xp = {r["player_id"]: r["total_xp"] for r in table("player_xp").collect()}
    assert xp == expected.player_xp
    return expected


def own_topics(bootstrap: str, name: str, max_offsets_per_trigger: int) \
        -> tuple[list[str], Settings]:
    """Two topics (orders, rewards) of the test's own, as other tests share the broker, and
    settings that read them in micro-batches of at most `max_offsets_per_trigger` records."""
    topics = [f"orders-{name}", f"rewards-{name}"]
    ensure_topics(bootstrap, {topic: 2 for topic in topics})
    return topics, load_settings("local", overrides={
        "exactly_once.kafka.bootstrap_servers": bootstrap,
        "exactly_once.kafka.max_offsets_per_trigger": str(max_offsets_per_trigger),
        "exactly_once.topics.orders.topic": topics[0],
        "exactly_once.topics.player_rewards.topic": topics[1],
    })


def generate(topics: list[str], **config) -> list:
    return generate_stream(GeneratorConfig(orders_topic=topics[0], rewards_topic=topics[1],
                                           **config))


def test_two_updates_against_a_real_broker(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap
    # small micro-batches, so ordering and dedup are exercised across batch boundaries
    topics, settings = own_topics(bootstrap, "e2e", max_offsets_per_trigger=1200)
    warehouse = tmp_path / "warehouse"

    first = generate(topics, events=2000, orders=150, players=40, seed=11, start=START)
    produce_records(bootstrap, first)
    result = run_pipeline(spark, settings, warehouse)
    delivered = consume_all(bootstrap, topics)
    assert len(delivered) == len(first)
    expected = assert_tables_match(spark, warehouse, delivered, *topics)
    assert expected.quarantined and len(expected.orders) < 150  # the stream had bad records
    assert result.total("duplicates_dropped") > 0 and result.total("cdc_stale") > 0

    # New events later in event time, plus exact redeliveries of the first run's records.
    second = generate(topics, events=800, orders=150, players=40, seed=12,
                      start=last_event_time(first) + timedelta(minutes=1))
    redelivered = first[::25]
    produce_records(bootstrap, second + redelivered)
    result = run_pipeline(spark, settings, warehouse)
    assert result.flow_input("bronze_kafka_events") == len(second) + len(redelivered), \
        "the second update reads only records it has not seen"
    assert_tables_match(spark, warehouse, consume_all(bootstrap, topics), *topics)


def gold(spark, warehouse) -> dict[str, list]:
    return {name: sorted(map(tuple, read_latest(spark, str(warehouse / name))
                             .drop("ingested_at", "kafka_timestamp").collect()))
            for name in ("orders", "orders_history", "player_xp_ledger", "player_xp")}



def test_a_broker_restart_and_an_older_consumer_position_leave_the_same_state(
        spark, own_broker, tmp_path):
    bootstrap = own_broker.bootstrap
    topics, settings = own_topics(bootstrap, "restart", max_offsets_per_trigger=400)
    warehouse = tmp_path / "warehouse"
    produce_records(bootstrap, generate(topics, events=1500, orders=120, players=30, seed=31,
                                        start=START))

    # The broker goes away and comes back while bronze is reading, several micro-batches in.
    failure: list[BaseException] = []

    def update():
        try:
            run_pipeline(spark, settings, warehouse)
        except BaseException as err:  # noqa: BLE001  (a failed update is retried below)
            failure.append(err)

    runner = threading.Thread(target=update)
    runner.start()
    first_batch = warehouse / "bronze_kafka_events" / "_delta_log" / "00000000000000000001.json"
    deadline = time.monotonic() + 300
    while not first_batch.exists() and runner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.stop(own_broker.home)
    time.sleep(2)
    broker.start(port=own_broker.port, home=own_broker.home)
    runner.join(timeout=900)
    if failure:  # the update may fail on the outage: the next one must make it whole
        run_pipeline(spark, settings, warehouse)
    delivered = consume_all(bootstrap, topics)
    assert_tables_match(spark, warehouse, delivered, *topics)
    before = gold(spark, warehouse)

    # A consumer restarting from an older committed position: an earlier checkpoint comes back.
    checkpoint = warehouse / "_pipeline" / "checkpoints" / "bronze_kafka_events"
    older = tmp_path / "older-checkpoint"
    shutil.copytree(checkpoint, older)
    produce_records(bootstrap, generate(topics, events=300, orders=120, players=30, seed=32,
                                        start=last_event_time(delivered) + timedelta(minutes=1)))
    run_pipeline(spark, settings, warehouse)
    after_new = gold(spark, warehouse)
    assert after_new != before
    shutil.rmtree(checkpoint)
    shutil.copytree(older, checkpoint)
    run_pipeline(spark, settings, warehouse)  # re-reads everything since the older position
    assert gold(spark, warehouse) == after_new
    assert_tables_match_gold_only(spark, warehouse, consume_all(bootstrap, topics), *topics)


def assert_tables_match_gold_only(spark, warehouse, delivered, orders_topic, rewards_topic):
    """After a re-read, bronze holds some deliveries twice; gold must still match exactly."""
    expected = expected_tables(delivered, {orders_topic: "order_id", rewards_topic: "player_id"})
    orders = read_latest(spark, str(warehouse / "orders")).collect()
    assert {r["order_id"]: r["event_id"] for r in orders} == {
        k: e["event_id"] for k, e in expected.orders.items()}
    xp = read_latest(spark, str(warehouse / "player_xp")).collect()
    assert {r["player_id"]: r["total_xp"] for r in xp} == expected.player_xp
