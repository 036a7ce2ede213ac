"""What happened to each delivery of a key, judged from what the tables hold (explain_reads.py).

Plain Python over the rows read; no Spark. A delivery is one bronze row (its Kafka coordinates
and when bronze ingested it), followed through the tables by those coordinates:

* `parsed_<topic>` found errors and `quarantine` holds it: quarantined, with its reasons;
* valid, not in silver, and silver holds a row with the same event_id and bytes (and lateness):
  dropped as a redelivery of that row's delivery;
* valid, not in silver, nothing it repeats, and ingested at or before silver's watermark: past
  the watermark (silver drops such a row unseen; by ingestion time, this needs a clock that
  went back);
* valid, and `silver_<topic>` holds it: it reached gold, judged there (gold_verdicts.py);
* otherwise the next table has not read it yet: pending (an update is running, or will).

Every delivery gets exactly one verdict, in log order (when bronze ingested it, then partition
and offset). Where a table cannot tell (bronze no longer holds a delivery that later tables do),
the delivery's `notes` say so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from exactly_once.local.inspect.delivery import (
    PAST_WATERMARK,
    PENDING,
    QUARANTINED,
    REDELIVERY,
    Delivery,
    Trail,
    Verdict,
    log_order,
    plain_value,
    utc,
)
from exactly_once.local.inspect.explain_reads import (
    BRONZE,
    QUARANTINE,
    CurrentStateGold,
    KeyRows,
    Row,
)
from exactly_once.local.inspect.gold_verdicts import (
    GoldVerdict,
    judge_current_state,
    judge_ledger,
)
from exactly_once.transforms.silver import ARRIVED_LATE, VALUE_DIGEST


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


def _trails(rows: KeyRows, key: str, fields: list[str]) -> list[Trail]:
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

    trails: list[Trail] = []
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
            timestamp=utc(b["timestamp"] if b else source.get("kafka_timestamp")),
            ingested_at=utc(ingested_at),
            key=p["kafka_key"] if p else _text(b["key"]) if b else source.get(entity),
            event={name: source.get(name) for name in fields} if readable else {},
            value=p["value"] if p else _text(b["value"]) if b else None)
        if b is None:
            delivery.notes.append(f"{BRONZE} no longer holds this delivery: what follows is "
                                  "what the later tables kept of it")
        if s is not None and p is None:
            delivery.notes.append(f"parsed_{topic.dataset_suffix} no longer holds this delivery")
        stamp = b["timestamp"] if b else source.get("kafka_timestamp")
        trails.append(Trail(delivery, b, p, s,
                             quarantine.get((partition, offset, stamp, delivery.value))))
    return sorted(trails, key=lambda t: log_order(t.delivery))


def deliveries_of(rows: KeyRows, key: str, fields: list[str]) -> list[Delivery]:
    """Every delivery of `key` (its Kafka key, or the entity its event names), in log order, each
    with its verdict."""
    trails = _trails(rows, key, fields)
    reached_gold = [t for t in trails if t.silver is not None]
    judge: Callable[[KeyRows, str, list[Trail]], list[GoldVerdict]] = (
        judge_current_state if isinstance(rows.gold, CurrentStateGold) else judge_ledger)
    in_gold = iter(judge(rows, key, reached_gold))  # in the order of reached_gold
    judged = []
    for trail in trails:
        notes: tuple[str, ...] = ()  # what gold's tables add
        if trail.silver is None:
            verdict = _before_gold(rows, trail, reached_gold)
        else:
            verdict, notes = next(in_gold)
        judged.append(replace(trail.delivery, verdict=verdict,
                              notes=[*trail.delivery.notes, *notes]))
    return judged


def _before_gold(rows: KeyRows, trail: Trail, in_silver: list[Trail]) -> Verdict:
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
                       f"its watermark ({plain_value(moment)})", f"silver_{suffix}")
    return Verdict(PENDING, f"silver_{suffix} has not read it yet", f"silver_{suffix}")


def _quarantined(row: Row) -> Verdict:
    return Verdict(QUARANTINED, row["reason"], QUARANTINE,
                   reasons=tuple(row["errors"]))
