"""Events as the tests send them, and as Kafka logs them: the payload builders of the contract's
two event kinds (`order`, `grant`), the record that carries one to a topic (`Event`), the clock
that dates them (`Clock`, `iso`), and the log a list of runs makes (`as_logged`,
`kafka_records`).

A payload is a dict in the contract's field order (docs/contract.md), so the same
event serialises (`json.dumps`) to the same bytes wherever a test builds it: silver drops a
copy as a redelivery only if its bytes are the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from reference import Delivered

from exactly_once.kafka.kcat import KafkaRecord

ORDERS, REWARDS = "orders", "player-rewards"  # conf/base.yml's topics
OCCURRED_AT = "2026-11-21T10:00:00Z"  # when an event happened, unless the test says
LATE_BY_LOG = timedelta(days=35)  # an `Event.late_by_log` reaches the broker this much later:
# past max_event_age (30 days), as a producer that re-sends a week-old backlog a month later


def iso(moment: datetime) -> str:
    """`moment` as events write `occurred_at`: ISO 8601 in UTC, with `Z`."""
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Clock:
    """The event times of a test, around one moment (`start`, UTC)."""

    start: datetime

    @classmethod
    def ago(cls, **before: float) -> Clock:
        """A clock that starts `before` (timedelta's keywords) the current whole second."""
        return cls(datetime.now(timezone.utc).replace(microsecond=0) - timedelta(**before))

    def at(self, seconds: float = 0, **after: float) -> str:
        """`seconds` (and timedelta's other keywords, `minutes=`, `days=`...) after `start`, as
        an `occurred_at`; negative: before it."""
        return iso(self.start + timedelta(seconds=seconds, **after))


def order(event_id: str | None, order_id: str, sequence: object, *,
          event_type: str = "order_updated", occurred_at: str = OCCURRED_AT,
          customer_id: str = "c1", status: str | None = "paid", amount: str = "10.00",
          currency: str = "EUR", state: bool | None = None) -> dict:
    """An `orders` event. `state` says whether it carries the order's state (customer, status,
    amount, currency): by default every event but a delete does, as the contract asks."""
    payload = {"event_id": event_id, "event_type": event_type, "order_id": order_id,
               "sequence": sequence, "occurred_at": occurred_at}
    carries_state = event_type != "order_deleted" if state is None else state
    if carries_state:
        payload |= {"customer_id": customer_id, "status": status, "amount": amount,
                    "currency": currency}
    return payload


def grant(event_id: str, player_id: str, xp: object, *, occurred_at: str = OCCURRED_AT,
          reason: str = "quest") -> dict:
    """A `player-rewards` event: `xp` granted to a player."""
    return {"event_id": event_id, "event_type": "xp_granted", "player_id": player_id, "xp": xp,
            "reason": reason, "occurred_at": occurred_at}


@dataclass(frozen=True)
class Event:
    """One record a test sends: its topic, Kafka key and value as the producer wrote them (a
    malformed value as is), and what the test knows of it."""

    topic: str
    key: str | None
    payload: str
    breaks: str | None = None  # for a malformed record: a rule (or parse check) it must fail
    late_by_log: bool = False  # the broker received it LATE_BY_LOG after the rest

    @classmethod
    def of(cls, payload: dict, *, breaks: str | None = None, late_by_log: bool = False) -> Event:
        """`payload` (an `order` or a `grant`) sent to its topic, keyed by its entity's ID."""
        topic, entity = (ORDERS, "order_id") if "order_id" in payload else (REWARDS, "player_id")
        return cls(topic, payload[entity], json.dumps(payload), breaks, late_by_log)


def as_logged(runs: list[list[Event | KafkaRecord]], log_start: datetime) \
        -> list[list[Delivered]]:
    """The runs as a topic of one partition logs them: offsets per topic in arrival order. The
    i-th record reaches the broker at `log_start` + i seconds (an `Event`, plus LATE_BY_LOG if
    it is `late_by_log`); a KafkaRecord keeps its own timestamp."""
    offsets = {ORDERS: 0, REWARDS: 0}
    logged: list[list[Delivered]] = []
    arrival = 0
    for run in runs:
        logged.append([])
        for record in run:
            if isinstance(record, Event):
                received = log_start + timedelta(seconds=arrival) + (
                    LATE_BY_LOG if record.late_by_log else timedelta())
                ms = int(received.timestamp() * 1000)
            else:
                ms = record.timestamp_ms
            arrival += 1
            logged[-1].append(Delivered(record.topic, 0, offsets[record.topic], record.key,
                                        record.payload, ms))
            offsets[record.topic] += 1
    return logged


def kafka_records(run: list[Delivered], topics: dict[str, str] | None = None) \
        -> list[KafkaRecord]:
    """The deliveries as kcat writes them, or a producer sends them; `topics` renames the
    model's topics (a test on the session's broker gives itself topics of its own)."""
    return [KafkaRecord((topics or {}).get(d.topic, d.topic), d.key, d.payload,
                        partition=d.partition, offset=d.offset, timestamp_ms=d.timestamp_ms)
            for d in run]
