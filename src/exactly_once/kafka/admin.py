"""Kafka's admin side, as the project's commands and runtime talk to a broker (any broker, the
local one or a production cluster): clients configured alike, reachability, topic creation,
the partitions' log start offsets."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from exactly_once.errors import BrokerError

# librdkafka logs every refused connection; the callers only care about the final outcome.
# Every client the project creates (admin, producer) logs here, through `client_config`.
RDKAFKA_LOGGER = logging.getLogger("exactly_once.kafka.rdkafka")
RDKAFKA_LOGGER.addHandler(logging.NullHandler())
RDKAFKA_LOGGER.propagate = False


def client_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """A librdkafka client's configuration: `bootstrap`, the given settings, the quiet logger.

    Typed `Any` because librdkafka takes a `logging.Logger` as `logger`, which confluent-kafka's
    annotations (str, int, float, bool values) leave out.
    """
    return {"bootstrap.servers": bootstrap, **settings, "logger": RDKAFKA_LOGGER}


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(client_config(bootstrap, **{"socket.timeout.ms": 5000}))


def answers(bootstrap: str, timeout: float = 5) -> bool:
    """Whether Kafka at `bootstrap` answers a metadata request."""
    try:
        _admin(bootstrap).list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def require_reachable(bootstrap: str, timeout: float = 5) -> None:
    """Returns once Kafka at `bootstrap` answers a metadata request, else BrokerError."""
    if not answers(bootstrap, timeout):
        raise BrokerError(f"cannot reach Kafka at {bootstrap}; start the local broker with "
                          "`exactly-once broker start`")


def log_start_offsets(bootstrap: str, partitions: list[tuple[str, int]],
                      timeout: float = 5) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the first offset the partition still holds: 0 until retention (or
    a records deletion) removes its oldest records, then the first one left."""
    requests = {TopicPartition(topic, partition): OffsetSpec.earliest()
                for topic, partition in partitions}
    admin = _admin(bootstrap)  # kept until the answers are in: a dropped client drops them
    try:
        futures = admin.list_offsets(requests, request_timeout=timeout)
        return {(tp.topic, tp.partition): future.result(timeout=timeout + 5).offset
                for tp, future in futures.items()}
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise BrokerError(f"cannot read the log start offsets from Kafka at {bootstrap}: "
                          f"{exc.args[0] if exc.args else 'no answer'}") from None


def ensure_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30) -> None:
    """Creates the missing topics (replication 1); existing topics are left as they are."""
    admin = _admin(bootstrap)
    try:
        existing = admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise BrokerError(f"cannot reach Kafka at {bootstrap}: {exc.args[0]}") from None
    missing = [NewTopic(name, num_partitions=n, replication_factor=1)
               for name, n in topics.items() if name not in existing]
    futures = admin.create_topics(missing, request_timeout=timeout) if missing else {}
    for name, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BrokerError(f"creating topic {name!r} failed: {exc.args[0]}") from None
    _wait_for_leaders(admin, list(topics), time.monotonic() + timeout)


def _wait_for_leaders(admin: AdminClient, names: list[str], deadline: float) -> None:
    """Topic creation returns before every partition has a leader; producing needs one."""
    while True:
        meta = admin.list_topics(timeout=5).topics
        if all(n in meta and meta[n].partitions and meta[n].error is None
               and all(p.leader >= 0 for p in meta[n].partitions.values()) for n in names):
            return
        if time.monotonic() > deadline:
            raise BrokerError(f"topics {names} have no partition leaders yet")
        time.sleep(0.2)
