"""What happened to each delivery of a key, judged from what the tables hold (explain_reads.py).

Plain Python over the rows read; no Spark. A delivery is one bronze row (its Kafka coordinates
and when bronze ingested it), followed through the tables by those coordinates:

* `parsed_<topic>` found errors and `quarantine` holds it: quarantined, with its reasons;
* valid, and `silver_<topic>` holds it: it reached gold (below);
* valid, not in silver, and silver holds a row with the same event_id and bytes (and lateness):
  dropped as a redelivery of that row's delivery;
* valid, not in silver, nothing it repeats, and ingested at or before silver's watermark: past
  the watermark (silver drops such a row unseen; by ingestion time, this needs a clock that
  went back);
* otherwise the next table has not read it yet: pending (an update is running, or will).

In gold, in log order (when bronze ingested it, then partition and offset):

* current-state topics (`orders`): a delivery whose `(sequence, event_id)` an earlier delivery
  already carried is a redelivery (gold's sequence guard ignores it); one older than the newest
  change delivered before it is stale, and lost to that change; else it is applied (a delete:
  tombstoned) once the SCD1 state holds that sequence or a newer one. This follows the log, as
  gold's promise does: the state table stores one change per key per micro-batch, so an event
  superseded within its own batch is applied and superseded, not stale, whatever the batches;
* ledger topics (`player_rewards`): the first delivery in time of an event the ledger holds is
  applied, a later one in time a redelivery of it; a delivery that arrived too late
  (`arrived_late`, silver's column) is late: kept aside in `late_events`, or without effect when
  a delivery in time was applied.

Every delivery gets exactly one verdict. Where a table cannot tell (bronze no longer holds a
delivery that later tables do, a gold row with no delivery left anywhere), the explanation says
so in `notes`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from exactly_once.local.auto_cdc.changes import IS_DELETE, SEQUENCE
from exactly_once.local.auto_cdc.scd2 import END_AT, START_AT
from exactly_once.local.observe.explain_reads import (
    BRONZE,
    QUARANTINE,
    CurrentStateGold,
    KeyRows,
    LedgerGold,
    Row,
)
from exactly_once.transforms.silver import ARRIVED_LATE, VALUE_DIGEST

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


def _utc(moment: datetime | None) -> datetime | None:
    """Spark hands timestamps to Python as naive local times: the same instant, in UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return datetime.fromtimestamp(moment.timestamp(), tz=timezone.utc)


def _order(delivery: Delivery) -> tuple:
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
    text = ", ".join(f"{k} {_plain(v)}" for k, v in named.items())
    return f"{text} (event {event})" if event is not None else text


def _plain(value: Any) -> str:
    if isinstance(value, datetime):
        moment = _utc(value)
        return moment.isoformat().replace("+00:00", "Z") if moment else ""
    return str(value)


@dataclass
class _Trail:
    """One delivery and its row in each table that holds it."""

    delivery: Delivery
    bronze: Row | None = None
    parsed: Row | None = None
    silver: Row | None = None
    quarantine: Row | None = None


def _numbered(rows: list[Row], identify: Callable[[Row], tuple]) -> dict[tuple, Row]:
    """Rows by identity, plus an occurrence number: records without Kafka coordinates (a file
    source without partition and offset) can share one; such copies are interchangeable."""
    seen: dict[tuple, int] = {}
    numbered = {}
    for row in rows:
        ident = identify(row)
        numbered[ident + (seen.get(ident, 0),)] = row
        seen[ident] = seen.get(ident, 0) + 1
    return numbered


def _text(value: Any) -> str | None:
    return None if value is None else bytes(value).decode("utf-8", "replace")


def _trails(rows: KeyRows, key: str, fields: list[str]) -> list[_Trail]:
    """The key's deliveries, each followed through the tables, in log order.

    Identity: (partition, offset, ingested_at, value digest, occurrence). Bronze's digest is
    computed here, as `parsed_<topic>` computed it (SHA-256 of the value's bytes); silver keeps
    no digest, so a silver row is its parsed row's by coordinates, ingestion and event_id.
    """
    entity, topic = rows.topic.key, rows.topic

    def parsed_at(r: Row) -> tuple:
        return (r["kafka_partition"], r["kafka_offset"], r["ingested_at"], r[VALUE_DIGEST])

    def bronze_at(r: Row) -> tuple:
        value = r["value"]
        digest = None if value is None else hashlib.sha256(bytes(value)).hexdigest()
        return (r["partition"], r["offset"], r["ingested_at"], digest)

    def delivered_as(r: Row) -> tuple:  # quarantine keeps no ingestion time
        return (r["kafka_partition"], r["kafka_offset"], r["kafka_timestamp"], r["value"])

    mine = [r for r in rows.parsed if key in (r["kafka_key"], r.get(entity))]
    parsed = _numbered(mine, parsed_at)
    # Bronze rows of the key: its Kafka key, or a record parsed as the key's (another key).
    known = {parsed_at(r) for r in mine}
    bronze = _numbered([r for r in rows.bronze if _text(r["key"]) == key or bronze_at(r) in known],
                       bronze_at)
    by_event = _numbered(mine, lambda r: (*parsed_at(r)[:3], r.get("event_id")))
    parsed_identity = {event_ident: next(i for i, r in parsed.items() if r is row)
                       for event_ident, row in by_event.items()}
    silver = {}
    for event_ident, row in _numbered(
            [r for r in rows.silver if r.get(entity) == key],
            lambda r: (r["kafka_partition"], r["kafka_offset"], r["ingested_at"],
                       r.get("event_id"))).items():
        silver[parsed_identity.get(event_ident, ("silver", *event_ident))] = row
    places = {delivered_as(r) for r in mine}
    quarantine = {delivered_as(r): r for r in rows.quarantine
                  if r["kafka_key"] == key or delivered_as(r) in places}

    trails: list[_Trail] = []
    for ident in dict.fromkeys([*bronze, *parsed, *silver]):
        b, p, s = bronze.get(ident), parsed.get(ident), silver.get(ident)
        source = p or s or {}
        partition, offset, ingested_at = (source.get("kafka_partition"),
                                          source.get("kafka_offset"), source.get("ingested_at"))
        if b is not None:
            partition, offset, ingested_at = b["partition"], b["offset"], b["ingested_at"]
        readable = source.get("event_id") is not None or source.get(entity) is not None
        delivery = Delivery(
            topic=topic.kafka_topic, partition=partition, offset=offset,
            timestamp=_utc(b["timestamp"] if b else source.get("kafka_timestamp")),
            ingested_at=_utc(ingested_at),
            key=p["kafka_key"] if p else _text(b["key"]) if b else source.get(entity),
            event={name: source.get(name) for name in fields} if readable else {},
            value=p["value"] if p else _text(b["value"]) if b else None)
        if b is None:
            delivery.notes.append(f"{BRONZE} no longer holds this delivery: what follows is "
                                  "what the later tables kept of it")
        if s is not None and p is None:
            delivery.notes.append(f"parsed_{topic.dataset_suffix} no longer holds this delivery")
        stamp = b["timestamp"] if b else source.get("kafka_timestamp")
        trails.append(_Trail(delivery, b, p, s,
                             quarantine.get((partition, offset, stamp, delivery.value))))
    return sorted(trails, key=lambda t: _order(t.delivery))


def deliveries_of(rows: KeyRows, key: str, fields: list[str]) -> list[Delivery]:
    """Every delivery of `key` (its Kafka key, or the entity its event names), in log order, each
    with its verdict."""
    trails = _trails(rows, key, fields)
    reached_gold = [t for t in trails if t.silver is not None]
    for trail in trails:
        if trail.silver is None:
            trail.delivery.verdict = _before_gold(rows, trail, reached_gold)
    judge: Callable[[KeyRows, str, list[_Trail]], None] = (
        _judge_current_state if isinstance(rows.gold, CurrentStateGold) else _judge_ledger)
    judge(rows, key, reached_gold)
    return [t.delivery for t in trails]


def _before_gold(rows: KeyRows, trail: _Trail, in_silver: list[_Trail]) -> Verdict:
    """The verdict of a delivery silver does not hold: quarantined, a redelivery silver dropped,
    past its watermark, or not read yet."""
    suffix = rows.topic.dataset_suffix
    p, q, delivery = trail.parsed, trail.quarantine, trail.delivery
    if p is None:
        return _quarantined(q) if q is not None else Verdict(
            PENDING, f"parsed_{suffix} has not read it yet", f"parsed_{suffix}")
    if p["errors"]:
        return _quarantined(q) if q is not None else Verdict(
            PENDING, f"{QUARANTINE} has not read it yet (it fails {', '.join(p['errors'])})",
            QUARANTINE, reasons=tuple(p["errors"]))
    late = ARRIVED_LATE if rows.topic.max_event_age else None
    twin = next((t for t in in_silver if t.parsed is not None
                 and t.silver is not None and t.silver["event_id"] == p["event_id"]
                 and t.parsed[VALUE_DIGEST] == p[VALUE_DIGEST]
                 and (late is None or t.silver[late] == p[late])), None)
    if twin is not None:
        kept = twin.delivery
        return Verdict(REDELIVERY, f"of {kept.position}: silver_{suffix} dropped it (same "
                       "event_id and bytes, within its watermark)", f"silver_{suffix}",
                       of=(kept.partition, kept.offset))
    watermark = rows.silver_watermark_ms
    if watermark is not None and delivery.ingested_at is not None and \
            delivery.ingested_at.timestamp() * 1000 <= watermark:
        moment = datetime.fromtimestamp(watermark / 1000, tz=timezone.utc)
        return Verdict(PAST_WATERMARK, f"silver_{suffix} dropped it: ingested at or before "
                       f"its watermark ({_plain(moment)})", f"silver_{suffix}")
    return Verdict(PENDING, f"silver_{suffix} has not read it yet", f"silver_{suffix}")


def _quarantined(row: Row) -> Verdict:
    return Verdict(QUARANTINED, row["reason"], QUARANTINE,
                   reasons=tuple(row["errors"]))


def _judge_current_state(rows: KeyRows, key: str, reached: list[_Trail]) -> None:
    gold = rows.gold
    assert isinstance(gold, CurrentStateGold)
    topic = rows.topic
    seq_by = topic.sequence_by
    state = [(tuple(r[SEQUENCE][c] for c in seq_by), r[IS_DELETE])
             for r in rows.state_rows.get(gold.current, []) if r.get(topic.key) == key]
    stored = max(state, default=None)  # the key's stored change: the newest applied
    journal = {tuple(r[SEQUENCE][c] for c in seq_by)
               for r in rows.state_rows.get(gold.history, []) if r.get(topic.key) == key}
    versions = sorted((r for r in rows.gold_rows.get(gold.history, [])
                       if r.get(topic.key) == key),
                      key=lambda r: tuple(r[START_AT][c] for c in seq_by))

    first_of: dict[tuple, Delivery] = {}
    newest: tuple[tuple, Delivery] | None = None
    applied: list[tuple[tuple, Delivery]] = []
    for trail in reached:
        delivery, row = trail.delivery, trail.silver
        assert row is not None
        rank = sequence_of(row, seq_by)
        deletes = row.get("event_type") in topic.delete_event_types
        if rank in first_of:  # silver let it through: other bytes, or after its watermark
            earlier = first_of[rank]
            newer = newest[0] if newest is not None and newest[0] > rank else None
            delivery.verdict = Verdict(
                REDELIVERY, f"of {earlier.position}, which silver let through (other bytes, or "
                f"after its watermark): {gold.current} ignored it, "
                + (f"older than {describe_change(newer, seq_by)}" if newer else
                   "not newer than itself"), gold.current,
                of=(earlier.partition, earlier.offset),
                lost_to=dict(zip(seq_by, newer, strict=True)) if newer else None)
            continue
        first_of[rank] = delivery
        if newest is not None and rank < newest[0]:
            delivery.verdict = Verdict(
                STALE, f"{gold.current} ignored it: older than "
                f"{describe_change(newest[0], seq_by)}, delivered before it at "
                f"{newest[1].position}", gold.current,
                lost_to=dict(zip(seq_by, newest[0], strict=True)))
        elif stored is None or rank > stored[0]:
            delivery.verdict = Verdict(PENDING, f"{gold.current} has not read it yet",
                                       gold.current)
        else:
            newest = (rank, delivery)
            applied.append((rank, delivery))
        if rank in journal:
            delivery.notes.append(_history_note(gold.history, rank, deletes, versions, seq_by))
        elif delivery.verdict is None or delivery.verdict.kind != PENDING:
            delivery.notes.append(f"{gold.history} has not read it yet")

    for i, (rank, delivery) in enumerate(applied):
        deletes = delivery.event.get("event_type") in topic.delete_event_types
        after = applied[i + 1] if i + 1 < len(applied) else None
        if after is not None:
            then = (f"; re-created by {describe_change(after[0], seq_by)}" if deletes else
                    f"; superseded by {describe_change(after[0], seq_by)}")
        elif stored is not None and rank == stored[0]:
            then = ("; the key stays deleted (its tombstone keeps older events out)"
                    if deletes else f"; the current row of {gold.current}")
        else:  # the newer change stored has no delivery left in the tables
            then = f"; superseded by {describe_change(stored[0], seq_by)}" if stored else ""
        delivery.verdict = Verdict(
            TOMBSTONED if deletes else APPLIED,
            (f"{describe_change(rank, seq_by)} deleted the row of {gold.current}" if deletes
             else f"{describe_change(rank, seq_by)} in {gold.current}") + then, gold.current)


def _history_note(history: str, rank: tuple, deletes: bool, versions: list[Row],
                  seq_by: tuple[str, ...]) -> str:
    def at(row: Row, column: str) -> tuple:
        value = row.get(column)
        return () if value is None else tuple(value[c] for c in seq_by)

    if deletes:
        closed = next((v for v in versions if at(v, END_AT) == rank), None)
        if closed is None:
            return f"{history}: a delete, in the journal (no open version to close)"
        return f"{history}: closes the version from {describe_change(at(closed, START_AT), seq_by)}"
    for version in versions:
        start, end = at(version, START_AT), at(version, END_AT)
        if start and start <= rank and (not end or rank < end):
            until = f"until {describe_change(end, seq_by)}" if end else "current"
            return (f"{history}: in the version from {describe_change(start, seq_by)}, "
                    f"{until}")
    return f"{history}: in the journal, in no version (an earlier delete closed it)"


def _judge_ledger(rows: KeyRows, key: str, reached: list[_Trail]) -> None:
    gold = rows.gold
    assert isinstance(gold, LedgerGold)
    ledger = {r["event_id"]: r for r in rows.gold_rows.get(gold.ledger, [])
              if r.get(rows.topic.key) == key}
    kept_aside = {r["event_id"]: r for r in rows.gold_rows.get(gold.late, [])}
    in_time: dict[str, Delivery] = {}
    for trail in reached:
        delivery, row = trail.delivery, trail.silver
        assert row is not None
        event_id = row["event_id"]
        if row.get(ARRIVED_LATE):
            continue
        if event_id in in_time:
            first = in_time[event_id]
            delivery.verdict = Verdict(
                REDELIVERY, f"of {first.position}: {gold.ledger} already holds event "
                f"{event_id}", gold.ledger, of=(first.partition, first.offset))
        elif event_id in ledger:
            in_time[event_id] = delivery
            delivery.verdict = Verdict(
                APPLIED, f"event {event_id} in {gold.ledger}: +{ledger[event_id].get('xp')} "
                "XP", gold.ledger)
        else:
            delivery.verdict = Verdict(PENDING, f"{gold.ledger} has not read it yet",
                                       gold.ledger)
    for trail in reached:
        delivery, row = trail.delivery, trail.silver
        assert row is not None
        event_id = row["event_id"]
        if not row.get(ARRIVED_LATE):
            continue
        late = f"the broker received it more than {rows.topic.max_event_age} after it occurred"
        if event_id in ledger:
            applied = in_time.get(event_id)
            where = f"from {applied.position}, delivered in time" if applied else \
                "from a delivery in time"
            delivery.verdict = Verdict(
                LATE, f"{late}: not applied; the grant was applied {where}", gold.ledger,
                of=(applied.partition, applied.offset) if applied else None)
        elif event_id in kept_aside:
            delivery.verdict = Verdict(
                LATE, f"{late}: kept aside in {gold.late}, not applied", gold.late)
        else:
            delivery.verdict = Verdict(PENDING, f"{gold.late} has not read it yet", gold.late)
