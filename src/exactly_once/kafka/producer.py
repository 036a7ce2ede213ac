"""Publishes `KafkaRecord`s to a broker exactly as given (key, payload, headers, timestamp).

The producer is idempotent with acks=all, so its own retries never add duplicates: every
duplicate that reaches the topic is one the *data* asked for (the generator's redeliveries),
which is what the pipeline's tests need to control.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from exactly_once.errors import ProducerError
from exactly_once.kafka.admin import client_config
from exactly_once.kafka.kcat import KafkaRecord

# A down broker must fail within seconds, not after librdkafka's default five minutes.
MESSAGE_TIMEOUT_MS = 10_000


def _producer(bootstrap: str) -> Producer:
    return Producer(client_config(bootstrap, **{
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        "socket.timeout.ms": 5_000,
        # Same key -> partition mapping as the Java client (and so Spark and kafka-console tools).
        "partitioner": "murmur2_random",
    }))


def _encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def _produce_one(producer: Producer, record: KafkaRecord, on_delivery) -> None:
    kwargs = {
        "key": _encode(record.key),
        "value": _encode(record.payload),
        "headers": [(name, _encode(value)) for name, value in record.headers],
        "on_delivery": on_delivery,
    }
    if record.partition is not None:
        kwargs["partition"] = record.partition
    if record.timestamp_ms is not None:
        kwargs["timestamp"] = record.timestamp_ms
    while True:
        try:
            producer.produce(record.topic, **kwargs)
            return
        except BufferError:  # local queue full: let deliveries drain, then retry
            producer.poll(0.5)


def produce_records(bootstrap: str, records: Iterable[KafkaRecord], timeout: float = 60) -> int:
    """Publishes the records in order and waits for all acks; returns how many were delivered.

    Raises ProducerError with a one-line message if any record failed (unreachable broker,
    unknown topic, ...) or was still unacknowledged after `timeout` seconds.
    """
    producer = _producer(bootstrap)
    delivered = 0
    failures: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1
        else:
            failures.append(error)

    sent = 0
    try:
        for record in records:
            _produce_one(producer, record, on_delivery)
            sent += 1
            producer.poll(0)
    except KafkaException as exc:
        raise ProducerError(f"producing to {bootstrap} failed: {exc.args[0].str()}") from None
    pending = producer.flush(timeout)
    if failures:
        raise ProducerError(f"{len(failures)} of {sent} records not delivered to {bootstrap}: "
                            f"{failures[0].str()}")
    if pending:
        raise ProducerError(f"{pending} of {sent} records unacknowledged after {timeout}s "
                            f"by {bootstrap}")
    return delivered
