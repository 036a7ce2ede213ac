"""What the pipeline should produce, computed in plain Python from the published records.

Independent of the Spark code on purpose: it re-implements the contract from its description
(JSON types, required fields, newest sequence wins, each event_id counts once), so a bug in the
pipeline's transforms cannot also hide in the expectation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

ORDER_TYPES = {"order_created", "order_updated", "order_cancelled", "order_deleted"}
STATE_FIELDS = ("customer_id", "status", "amount", "currency")


@dataclass(frozen=True)
class Delivered:
    """A record as Kafka stored it."""

    topic: str
    partition: int
    offset: int
    key: str | None
    payload: str | None


def _timestamp(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _decimal(value) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def valid_event(record: Delivered, entity: str) -> dict | None:
    """The event if the record honours the contract, else None (it belongs in quarantine)."""
    try:
        event = json.loads(record.payload or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict) or not event.get("event_id") or record.key is None:
        return None
    if event.get(entity) != record.key or _timestamp(event.get("occurred_at")) is None:
        return None
    if entity == "order_id":
        if event.get("event_type") not in ORDER_TYPES or not _is_int(event.get("sequence")):
            return None
        if event["event_type"] != "order_deleted":
            if any(event.get(f) is None for f in STATE_FIELDS):
                return None
            amount = _decimal(event["amount"])
            if amount is None or amount < 0:
                return None
    else:
        if event.get("event_type") != "xp_granted" or not _is_int(event.get("xp")) \
                or event["xp"] <= 0:
            return None
    return event


@dataclass
class Expected:
    quarantined: list[Delivered]
    silver_event_ids: dict[str, set[str]]  # topic -> event_ids
    orders: dict[str, dict]  # order_id -> newest non-deleted event
    player_xp: dict[str, int]


def expected_tables(records: list[Delivered], topics: dict[str, str]) -> Expected:
    """`topics` maps Kafka topic -> entity key field (order_id / player_id)."""
    quarantined, silver, newest, xp_events = [], {t: set() for t in topics}, {}, {}
    for record in records:
        entity = topics[record.topic]
        event = valid_event(record, entity)
        if event is None:
            quarantined.append(record)
            continue
        silver[record.topic].add(event["event_id"])
        if entity == "order_id":
            rank = (event["sequence"], record.offset)
            if record.key not in newest or rank > newest[record.key][0]:
                newest[record.key] = (rank, event)
        else:
            xp_events[event["event_id"]] = event
    orders = {key: event for key, (_, event) in newest.items()
              if event["event_type"] != "order_deleted"}
    player_xp: dict[str, int] = {}
    for event in xp_events.values():
        player_xp[event["player_id"]] = player_xp.get(event["player_id"], 0) + event["xp"]
    return Expected(quarantined, silver, orders, player_xp)
