"""A pipeline's micro-batches sent to a Kafka topic once each: one Kafka transaction per batch, and
in the same transaction a marker saying which batch it was.

Structured Streaming runs a micro-batch again after a crash (the one it logged and never
committed). A batch's records and its marker commit atomically, so on that replay the marker
says whether the records are in the topic already:

* `transactional.id` names the writer (the streaming query and the flow): a new producer of the
  same id first completes or aborts whatever transaction the crashed one left open
  (`init_transactions`), so the marker read afterwards is settled;
* the marker is an offset commit of the consumer group of the same name, made inside the
  transaction (`send_offsets_to_transaction`): the offset of partition 0 of the topic is the
  batch id + 1, visible only once the transaction commits, and read back with `committed()`
  (librdkafka asks the coordinator for stable offsets, so a commit still being written waits).

The boundary, as docs/sinks.md states it: a consumer sees each row once when it reads
`read_committed` (Kafka's default is `read_uncommitted`, which also delivers the records of a
transaction a crash left aborted); and a batch replayed after its marker expired (the broker's
`offsets.retention.minutes`, 7 days by default, counted from the marker's commit) is sent again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from exactly_once.kafka.admin import client_config

TIMEOUT_SECONDS = 30
# Each setting the runtime gives its transactional producer; a sink's own `kafka.*` options go
# on top, except these, which make it exactly-once.
PRODUCER_SETTINGS = {
    "acks": "all",
    "enable.idempotence": True,
    # Same key -> partition mapping as the Java client, so as Spark's own Kafka sink.
    "partitioner": "murmur2_random",
    "message.timeout.ms": 10_000,
    "transaction.timeout.ms": 60_000,
}
RUNTIME_SETTINGS = ("transactional.id", "enable.idempotence", "isolation.level", "group.id")


@dataclass(frozen=True)
class Record:
    """One row of a sink flow, as Kafka takes it."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] | None = None
    partition: int | None = None


def refused_setting(settings: Mapping[str, str]) -> tuple[str | None, str] | None:
    """Why the transactional producer cannot take `settings` (librdkafka names): the setting at
    fault (None when only their combination is) and librdkafka's reason; None when it takes
    them. Building a client checks them without connecting."""
    def problem(checked: Mapping[str, str]) -> str | None:
        try:
            Producer(client_config("localhost:9092", **{
                **PRODUCER_SETTINGS, **checked, "transactional.id": "exactly-once-check"}))
        except KafkaException as err:
            cause = err.args[0] if err.args else err
            return str(cause.str() if isinstance(cause, KafkaError) else cause)
        return None

    reason = problem(settings)
    if reason is None:
        return None
    for name, value in settings.items():
        alone = problem({name: value})
        if alone is not None:
            return name, alone
    return None, reason


def topic_exists(bootstrap: str, topic: str, settings: Mapping[str, str]) -> bool:
    consumer = Consumer(client_config(bootstrap, **{**settings, "group.id": "exactly-once-probe"}))
    try:
        topics = consumer.list_topics(topic, timeout=TIMEOUT_SECONDS).topics
    finally:
        consumer.close()
    found = topics.get(topic)
    return found is not None and found.error is None


class TransactionalBatches:
    """Sends micro-batches of one writer (a streaming query's flow) to `topic`, each in one
    transaction with its marker."""

    def __init__(self, bootstrap: str, topic: str, writer: str, settings: Mapping[str, str]):
        self.bootstrap, self.topic, self.writer = bootstrap, topic, writer
        self.settings = dict(settings)
        self.producer = Producer(client_config(bootstrap, **{
            **PRODUCER_SETTINGS, **self.settings, "transactional.id": writer}))
        # Completes or aborts the transaction a crashed producer of this writer left open.
        self.producer.init_transactions(TIMEOUT_SECONDS)

    def _marker_group(self) -> Consumer:
        return Consumer(client_config(self.bootstrap, **{
            **self.settings, "group.id": self.writer, "enable.auto.commit": False,
            "isolation.level": "read_committed"}))

    def already_sent(self, batch_id: int) -> bool:
        """Whether a transaction of this writer committed batch `batch_id` (or a later one)."""
        consumer = self._marker_group()
        try:
            (committed,) = consumer.committed([TopicPartition(self.topic, 0)],
                                              timeout=TIMEOUT_SECONDS)
        finally:
            consumer.close()
        return committed.offset > batch_id  # no commit: a negative sentinel

    def send(self, batch_id: int, records: Iterable[Record]) -> int:
        """Produce `records` and the batch's marker in one transaction; how many records."""
        self.producer.begin_transaction()
        try:
            count = 0
            for record in records:
                self._produce(record)
                count += 1
            consumer = self._marker_group()
            try:
                group = consumer.consumer_group_metadata()
            finally:
                consumer.close()
            marker = json.dumps({"writer": self.writer, "batch": batch_id})
            self.producer.send_offsets_to_transaction(
                [TopicPartition(self.topic, 0, batch_id + 1, metadata=marker)], group,
                TIMEOUT_SECONDS)
        except BaseException:
            self._abort()
            raise
        self.commit()
        return count

    def commit(self) -> None:
        """Commit the open transaction: its records and marker become visible at once."""
        self.producer.commit_transaction(TIMEOUT_SECONDS)

    def _abort(self) -> None:
        try:
            self.producer.abort_transaction(TIMEOUT_SECONDS)
        except KafkaException:
            pass  # the next producer of this writer aborts it (`init_transactions`)

    def _produce(self, record: Record) -> None:
        kwargs: dict[str, Any] = {"value": record.value, "key": record.key}
        if record.headers:
            kwargs["headers"] = record.headers
        if record.partition is not None:
            kwargs["partition"] = record.partition
        while True:
            try:
                self.producer.produce(self.topic, **kwargs)
                return
            except BufferError:  # the local queue is full: let deliveries drain
                self.producer.poll(0.5)
