"""A delivery of a key and its verdict: what `exactly-once explain` says of each one.

    Delivery  one bronze row (or what later tables kept of it): where Kafka stored it, its event
    Verdict   the one thing that happened to it (KINDS), the table that says so, and whom it
              repeats or lost to
    Trail     a delivery with its row in each table that holds it, for the judges
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from exactly_once.local.inspect.explain_reads import Row

QUARANTINED = "quarantined"
REDELIVERY = "redelivery"
PAST_WATERMARK = "past watermark"
LATE = "late"
APPLIED = "applied"
STALE = "stale"
TOMBSTONED = "tombstoned"
PENDING = "pending"  # a table downstream has not read it yet
KINDS = (QUARANTINED, REDELIVERY, PAST_WATERMARK, LATE, APPLIED, STALE, TOMBSTONED, PENDING)


@dataclass(frozen=True)
class Verdict:
    kind: str  # one of KINDS
    text: str  # the verdict in a sentence, for a person
    decided_by: str  # the table whose contents say so
    reasons: tuple[str, ...] = ()  # quarantined: every check it failed
    # redelivery: (partition, offset) of the delivery it repeats; late: of the delivery in time
    # that was applied instead
    of: tuple[int | None, int | None] | None = None
    lost_to: dict[str, Any] | None = None  # stale: the newer change's sequence fields


@dataclass
class Delivery:
    """One delivery of the key, as the tables know it."""

    topic: str
    partition: int | None  # None: the record came without Kafka coordinates (a file source)
    offset: int | None
    timestamp: datetime | None  # the record's Kafka timestamp (UTC)
    ingested_at: datetime | None  # when bronze wrote it (UTC)
    key: str | None
    event: dict[str, Any]  # the contract's fields as parsed; {} when the value was unreadable
    value: str | None  # the value as text (quarantined deliveries: as delivered)
    verdict: Verdict | None = None
    notes: list[str] = field(default_factory=list)  # what a table adds, or cannot tell

    @property
    def position(self) -> str:
        def known(value: int | None) -> str:
            return "?" if value is None else str(value)

        return f"{self.topic}/{known(self.partition)}@{known(self.offset)}"


def utc(moment: datetime | None) -> datetime | None:
    """Spark hands timestamps to Python as naive local times: the same instant, in UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return datetime.fromtimestamp(moment.timestamp(), tz=timezone.utc)


def log_order(delivery: Delivery) -> tuple:
    """Log order: when bronze ingested it (unknown first: older than anything bronze holds),
    then partition and offset (and, for records without them, the Kafka timestamp)."""
    earliest = datetime.min.replace(tzinfo=timezone.utc)
    return (delivery.ingested_at is not None, delivery.ingested_at or earliest,
            delivery.partition is not None, delivery.partition or 0,
            delivery.offset is not None, delivery.offset or 0, delivery.timestamp or earliest)


def sequence_of(event: dict[str, Any], sequence_by: tuple[str, ...]) -> tuple:
    return tuple(event.get(c) for c in sequence_by)


def describe_change(rank: tuple, sequence_by: tuple[str, ...]) -> str:
    """`sequence 3 (event o1-3)` for (3, "o1-3") sequenced by (sequence, event_id)."""
    named = dict(zip(sequence_by, rank, strict=True))
    event = named.pop("event_id", None)
    text = ", ".join(f"{k} {plain_value(v)}" for k, v in named.items())
    return f"{text} (event {event})" if event is not None else text


def _in_utc(moment: datetime) -> datetime:
    """The instant, naive (Spark's local time) or in any zone, in UTC."""
    instant = utc(moment)
    assert instant is not None
    return instant.astimezone(timezone.utc)


def iso_utc(moment: datetime) -> str:
    """ISO 8601 in UTC, to the millisecond when it has no finer part: 2026-11-01T00:02:35.840Z."""
    instant = _in_utc(moment)
    spec = "milliseconds" if instant.microsecond % 1000 == 0 and instant.microsecond else "auto"
    return instant.isoformat(timespec=spec).replace("+00:00", "Z")


def shown_utc(moment: datetime) -> str:
    """An instant as the CLI and the dashboard show it to a person: UTC, to the second, the
    zone named (the dashboard's own time is UTC too): 2026-11-01 00:02:35 UTC."""
    return f"{_in_utc(moment):%Y-%m-%d %H:%M:%S} UTC"


def plain_value(value: Any) -> str:
    return iso_utc(value) if isinstance(value, datetime) else str(value)


@dataclass
class Trail:
    """One delivery and its row in each table that holds it."""

    delivery: Delivery
    bronze: Row | None = None
    parsed: Row | None = None
    silver: Row | None = None
    quarantine: Row | None = None
