"""The reference model per delivery: what should have happened to each one, from the log alone.

`tests/reference.py` models the tables; this models the verdict `exactly-once explain` gives
each delivery, in plain Python from the published records, independent of the Spark code and
of the tables the explanation reads. Deliveries are taken in log order (the order Kafka stored
them; one partition per topic in the tests). Silver's dedup is modelled as
`reference.silver_deliveries` models it: every copy arrives within the watermark delay of the
first, so the first delivery of each (event_id, bytes[, arrived late]) is the one silver keeps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from reference import MAX_EVENT_AGE, Delivered, arrived_in_time, valid_event


@dataclass(frozen=True)
class Expected:
    kind: str  # quarantined, redelivery, applied, tombstoned, stale, late
    of: int | None = None  # redelivery: the offset it repeats; late: the in-time offset applied
    lost_to: tuple | None = None  # stale (or a redelivery older than the newest): (seq, id)


def entity_of(record: Delivered, entity: str) -> str | None:
    """The entity the record's event names, if its value is a JSON object with it as a string."""
    try:
        event = json.loads(record.payload or "")
    except json.JSONDecodeError:
        return None
    value = event.get(entity) if isinstance(event, dict) else None
    return value if isinstance(value, str) else None


def deliveries_of_key(records: list[Delivered], topic: str, entity: str, key: str) \
        -> list[Delivered]:
    """A key's deliveries: its Kafka key, or the entity its event names."""
    return [r for r in records if r.topic == topic
            and (r.key == key or entity_of(r, entity) == key)]


def keys(records: list[Delivered], topic: str, entity: str) -> set[str]:
    return {k for r in records if r.topic == topic
            for k in (r.key, entity_of(r, entity)) if k is not None}


def order_verdicts(records: list[Delivered], topic: str = "orders",
                   deletes: tuple[str, ...] = ("order_deleted",)) -> dict[int, Expected]:
    """offset -> verdict, for every delivery of the topic. Per key, in log order: a delivery of
    an event already applied is a redelivery; one older than the newest change delivered before
    it is stale; else it is applied (a delete: tombstoned)."""
    verdicts: dict[int, Expected] = {}
    kept: dict[tuple, int] = {}  # (event_id, bytes) -> the offset silver keeps
    first_of: dict[tuple, int] = {}  # (key, rank) -> the first offset that reached gold
    newest: dict[str, tuple] = {}  # key -> the newest rank delivered so far
    for record in (r for r in records if r.topic == topic):
        event = valid_event(record, "order_id")
        if event is None:
            verdicts[record.offset] = Expected("quarantined")
            continue
        copy = (event["event_id"], record.payload)
        if copy in kept:
            verdicts[record.offset] = Expected("redelivery", of=kept[copy])
            continue
        kept[copy] = record.offset
        key, rank = record.key, (event["sequence"], event["event_id"])
        top = newest.get(key)
        if (key, rank) in first_of:
            verdicts[record.offset] = Expected("redelivery", of=first_of[(key, rank)],
                                               lost_to=top if top > rank else None)
            continue
        first_of[(key, rank)] = record.offset
        if top is not None and rank < top:
            verdicts[record.offset] = Expected("stale", lost_to=top)
        else:
            newest[key] = rank
            verdicts[record.offset] = Expected(
                "tombstoned" if event["event_type"] in deletes else "applied")
    return verdicts


def grant_verdicts(records: list[Delivered], topic: str = "player-rewards",
                   max_age: timedelta = MAX_EVENT_AGE) -> dict[int, Expected]:
    """offset -> verdict: the first delivery in time of a grant is applied, a later one in time a
    redelivery of it, one that arrived too late is late (`of`: the delivery in time applied)."""
    verdicts: dict[int, Expected] = {}
    kept: dict[tuple, int] = {}  # (event_id, bytes, late) -> the offset silver keeps
    applied: dict[str, int] = {}  # event_id -> the first offset in time that reached gold
    late: dict[int, str] = {}  # offset of a late delivery that reached gold -> its event_id
    for record in (r for r in records if r.topic == topic):
        event = valid_event(record, "player_id")
        if event is None:
            verdicts[record.offset] = Expected("quarantined")
            continue
        in_time = arrived_in_time(record, event, max_age)
        copy = (event["event_id"], record.payload, in_time)
        if copy in kept:
            verdicts[record.offset] = Expected("redelivery", of=kept[copy])
            continue
        kept[copy] = record.offset
        if not in_time:
            late[record.offset] = event["event_id"]
        elif event["event_id"] in applied:
            verdicts[record.offset] = Expected("redelivery", of=applied[event["event_id"]])
        else:
            applied[event["event_id"]] = record.offset
            verdicts[record.offset] = Expected("applied")
    for offset, event_id in late.items():
        verdicts[offset] = Expected("late", of=applied.get(event_id))
    return verdicts
