"""Against a real KRaft broker: lifecycle, topic creation and a produce/consume round trip."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from exactly_once.errors import BrokerError
from exactly_once.kafka import admin
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import KafkaRecord
from exactly_once.kafka.producer import ProducerError, produce_records
from exactly_once.services import broker
from exactly_once.services.processes import free_port

pytestmark = pytest.mark.kafka


def _partition_counts(bootstrap: str) -> dict[str, int]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {name: len(meta.partitions) for name, meta in topics.items()}


def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    partitions = _partition_counts(bootstrap)[topic]
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    messages, deadline = [], time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    return messages


def test_status_and_second_start_return_the_running_broker(kafka_broker):  
    assert broker.status(kafka_broker.home) == kafka_broker
    again = broker.start(port=kafka_broker.port, home=kafka_broker.home)
    assert again.pid == kafka_broker.pid
    assert _partition_counts(kafka_broker.bootstrap) is not None


def test_start_on_a_port_someone_else_listens_on_fails(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} is already in use"):
            broker.start(port=port, home=tmp_path)
    assert broker.status(tmp_path) is None


def test_missing_jars_tell_to_run_make_setup(tmp_path, monkeypatch):
    monkeypatch.setattr(broker, "BROKER_JARS", tmp_path / "no-jars")
    with pytest.raises(BrokerError, match="make setup"):
        broker.start(port=free_port(), home=tmp_path / "home")


def test_ensure_topics_is_idempotent(kafka_broker):  
    topics = {"idem-a": 3, "idem-b": 1}
    admin.ensure_topics(kafka_broker.bootstrap, topics)
    admin.ensure_topics(kafka_broker.bootstrap, topics)
    counts = _partition_counts(kafka_broker.bootstrap)
    assert {name: counts[name] for name in topics} == topics


def test_produced_records_come_back_unchanged(kafka_broker):  
    topic = "round-trip"
    admin.ensure_topics(kafka_broker.bootstrap, {topic: 3})
    sent = [
        KafkaRecord(topic, "k-1", '{"n": 1}', partition=2, timestamp_ms=1793491200000,
                    headers=(("producer", "test"), ("attempt", "1"))),
        KafkaRecord(topic, None, "no key", partition=0, timestamp_ms=1793491200001),
        KafkaRecord(topic, "tombstone", None, partition=1, headers=(("empty", None),)),
        KafkaRecord(topic, "ünïcode", "payload ✓", partition=0),
    ]
    assert produce_records(kafka_broker.bootstrap, sent) == len(sent)
    received = _consume_all(kafka_broker.bootstrap, topic, len(sent))
    got = {
        (m.partition(), None if m.key() is None else m.key().decode(),
         None if m.value() is None else m.value().decode(),
         tuple((n, None if v is None else v.decode()) for n, v in m.headers() or []))
        for m in received
    }
    assert got == {(r.partition, r.key, r.payload, r.headers) for r in sent}
    stamps = {m.key(): m.timestamp()[1] for m in received}
    assert stamps[b"k-1"] == 1793491200000 and stamps[None] == 1793491200001


def test_same_key_lands_on_one_partition(kafka_broker):  
    topic = "keyed"
    admin.ensure_topics(kafka_broker.bootstrap, {topic: 4})
    sent = [KafkaRecord(topic, f"key-{i % 5}", str(i)) for i in range(50)]
    assert produce_records(kafka_broker.bootstrap, sent) == 50
    received = _consume_all(kafka_broker.bootstrap, topic, 50)
    partitions_by_key: dict[bytes, set[int]] = {}
    for message in received:
        partitions_by_key.setdefault(message.key(), set()).add(message.partition())
    assert len(received) == 50
    assert all(len(parts) == 1 for parts in partitions_by_key.values())
    # Per-key publish order is preserved (the pipeline's out-of-order handling relies on it).
    for key in partitions_by_key:
        values = [int(m.value()) for m in received if m.key() == key]
        assert values == sorted(values)


def test_producing_to_an_unreachable_broker_fails_fast():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ProducerError, match="not delivered"):
        produce_records(f"127.0.0.1:{port}", [KafkaRecord("orders", "k", "v")], timeout=30)
    assert time.monotonic() - started < 20


def test_stop_stops_and_forgets(tmp_path):
    info = broker.start(port=free_port(), home=tmp_path)
    assert broker.status(tmp_path) == info
    assert broker.stop(tmp_path) is True
    assert broker.status(tmp_path) is None
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", info.port)) != 0
    assert broker.stop(tmp_path) is False


def test_a_generated_stream_publishes_completely(kafka_broker):  
    config = GeneratorConfig(events=300, orders=30, players=10, seed=3,
                             orders_topic="gen-orders", rewards_topic="gen-rewards")
    records = generate_stream(config)
    admin.ensure_topics(kafka_broker.bootstrap, {"gen-orders": 2, "gen-rewards": 2})
    assert produce_records(kafka_broker.bootstrap, records) == len(records)
    expected = sorted((r.key or "", r.payload) for r in records if r.topic == "gen-orders")
    received = _consume_all(kafka_broker.bootstrap, "gen-orders", len(expected))
    got = sorted(((m.key() or b"").decode(), m.value().decode()) for m in received)
    assert got == expected


def test_a_broker_that_dies_on_startup_reports_its_log(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("version=1\nnode.id=99\n")  # wrong node
    with pytest.raises(BrokerError, match="exited during startup"):
        broker.start(port=free_port(), home=tmp_path, timeout=60)
    assert broker.status(tmp_path) is None
