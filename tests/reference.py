"""What the pipeline should produce, computed in plain Python from the published records.

Independent of the Spark code on purpose: it re-implements the contract from its description
(JSON types, required fields, newest sequence wins, each event_id counts once), so a bug in the
pipeline's transforms cannot also hide in the expectation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from types import MappingProxyType

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
    timestamp_ms: int | None = None  # the record's Kafka timestamp; None: unknown


# conf/base.yml: topics.player_rewards.max_event_age
MAX_EVENT_AGE = timedelta(days=30)
# Optional fields a contract gains (docs/contract.md): field -> the Python type of
# its JSON value (str for a JSON string). Absent or null is allowed; any other value is not.
Extra = Mapping[str, type]
NO_EXTRA: Extra = MappingProxyType({})
# A rule of the contract over an event's JSON fields: whether the event passes it.
Rule = Callable[[dict], bool]


class Contract(Mapping[str, type]):
    """A contract changed from docs/contract.md's: the optional fields it gained (as `Extra`, which
    it can stand for) and `rules` by name, each replacing the page's rule of that name
    (`non_negative_amount`) or added to them (docs/contract-changes.md)."""

    def __init__(self, fields: Extra = NO_EXTRA, rules: Mapping[str, Rule] = MappingProxyType({})):
        self.fields, self.rules = fields, rules

    def __getitem__(self, name: str) -> type:
        return self.fields[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


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


def valid_event(record: Delivered, entity: str, extra: Extra = NO_EXTRA) -> dict | None:
    """The event if the record honours the contract, else None (it belongs in quarantine).
    `extra`: optional fields the contract has beyond docs/contract.md's tables."""
    try:
        event = json.loads(record.payload or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict) or not event.get("event_id") or record.key is None:
        return None
    if event.get(entity) != record.key or _timestamp(event.get("occurred_at")) is None:
        return None
    if any(event.get(f) is not None and type(event[f]) is not kind for f, kind in extra.items()):
        return None
    if entity == "order_id":
        if event.get("event_type") not in ORDER_TYPES or not _is_int(event.get("sequence")):
            return None
        if event["event_type"] != "order_deleted":
            if any(event.get(f) is None for f in STATE_FIELDS):
                return None
            if _decimal(event["amount"]) is None:
                return None
    elif entity == "player_id":
        if event.get("event_type") != "xp_granted" or not _is_int(event.get("xp")) \
                or event["xp"] <= 0:
            return None
    # Any other entity is a topic `exactly-once add-topic` added: the rules above are all it has.
    rules = {**(ORDER_RULES if entity == "order_id" else {}), **getattr(extra, "rules", {})}
    return event if all(rule(event) for rule in rules.values()) else None


def _non_negative_amount(event: dict) -> bool:
    amount = _decimal(event.get("amount"))
    return amount is None or amount >= 0


# docs/contract.md's rules of `orders` a changed contract may replace (Contract.rules), by name.
ORDER_RULES: Mapping[str, Rule] = MappingProxyType({"non_negative_amount": _non_negative_amount})


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
            rank = (event["sequence"], event["event_id"])
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


# --- The rest of the contract: history, ledger, silver's watermark, quarantine ------------------
#
# Used by tests/test_properties.py (docs/reference-model.md). Every function takes the
# deliveries in the order Kafka stored them (offsets increase per topic) and knows nothing of Spark.

# (sequence, event_id): the pipeline's `struct(sequence, event_id)`. Ties on sequence go to the
# higher event_id, the same for every redelivery, so where an event is redelivered never matters.
Rank = tuple


def rank_of(struct) -> Rank | None:
    """A table's `struct(sequence, event_id)` (SCD2's __START_AT and __END_AT, a journal's
    sequence) as the model's rank; None for a null one (an open version's end)."""
    return None if struct is None else (struct["sequence"], struct["event_id"])


def _valid_deliveries(records: list[Delivered], topic: str, entity: str,
                      extra: Extra = NO_EXTRA) -> list[tuple[Delivered, dict]]:
    return [(r, e) for r in records if r.topic == topic
            and (e := valid_event(r, entity, extra)) is not None]


def _by_key_in_rank_order(records: list[Delivered], topic: str, extra: Extra = NO_EXTRA) \
        -> dict[str, list[tuple[Rank, dict]]]:
    """Each order's valid events in (sequence, event_id) order; a redelivery is the same event."""
    by_key: dict[str, dict[Rank, dict]] = {}
    for record, event in _valid_deliveries(records, topic, "order_id", extra):
        by_key.setdefault(record.key, {})[(event["sequence"], event["event_id"])] = event
    return {key: sorted(events.items(), key=lambda item: item[0])
            for key, events in by_key.items()}


def distinct_order_events(records: list[Delivered], topic: str = "orders",
                          extra: Extra = NO_EXTRA) -> list[tuple[str, Rank]]:
    """(order_id, rank) of each distinct valid order event: what the SCD2 journal holds, one row
    per event however often it was delivered."""
    return sorted((key, rank) for key, events in _by_key_in_rank_order(records, topic,
                                                                       extra).items()
                  for rank, _ in events)


def current_orders(records: list[Delivered], topic: str = "orders",
                   extra: Extra = NO_EXTRA) -> dict[str, dict]:
    """SCD1: per order the valid event with the highest (sequence, event_id), absent if that is a
    delete. An older event than a delete never resurrects the order; a newer upsert does."""
    current = {}
    for key, events in _by_key_in_rank_order(records, topic, extra).items():
        _, newest = events[-1]
        if newest["event_type"] != "order_deleted":
            current[key] = newest
    return current


def latest_by_key(records: list[Delivered], topic: str, entity: str,
                  extra: Extra = NO_EXTRA) -> dict[str, dict]:
    """A topic `exactly-once add-topic` added: per key, its valid event with the newest
    (occurred_at, event_id), the SCD1 gold table it gets. `extra`: its fields beyond event_id,
    occurred_at and the key."""
    latest: dict[str, tuple[tuple, dict]] = {}
    for record, event in _valid_deliveries(records, topic, entity, extra):
        rank = (_timestamp(event["occurred_at"]), event["event_id"])
        if record.key not in latest or rank > latest[record.key][0]:
            latest[record.key] = (rank, event)
    return {key: event for key, (_, event) in latest.items()}


def _amount(event: dict) -> Decimal:
    return _decimal(event["amount"]).quantize(Decimal("0.01"))


@dataclass(frozen=True)
class Version:
    """One SCD2 row of `orders_history`."""

    order_id: str
    start: Rank  # __START_AT: the (sequence, event_id) of the version's first event
    end: Rank | None  # __END_AT: the next version's start or the delete's; None = current
    event: dict  # the version's last event (untracked columns update the version in place)


def order_history(records: list[Delivered], topic: str = "orders",
                  tracked: tuple[str, ...] = ("status", "amount"),
                  extra: Extra = NO_EXTRA) -> list[Version]:
    """SCD2 as Databricks documents it for `track_history_column_list=tracked`.

    Per key, the events in (sequence, event_id) order: a version is a maximal run of consecutive
    upserts with equal tracked values; a delete closes the open version (its sequence is the
    version's end) and the next upsert opens a new one, whatever its values.
    """
    def values(event):
        return tuple(_amount(event) if c == "amount" else event[c] for c in tracked)

    versions = []
    for key, events in _by_key_in_rank_order(records, topic, extra).items():
        start, last = None, None  # the open version
        for rank, event in events:
            if event["event_type"] == "order_deleted":
                if start is not None:
                    versions.append(Version(key, start, rank, last))
                start, last = None, None
            elif start is not None and values(event) == values(last):
                last = event
            else:
                if start is not None:
                    versions.append(Version(key, start, rank, last))
                start, last = rank, event
        if start is not None:
            versions.append(Version(key, start, None, last))
    return versions


def arrived_in_time(record: Delivered, event: dict, max_age: timedelta = MAX_EVENT_AGE) -> bool:
    """The broker received it at most `max_age` after it occurred, by the record's Kafka
    timestamp: a fact of the log, whatever day the pipeline runs."""
    if record.timestamp_ms is None:
        return True
    received = datetime.fromtimestamp(record.timestamp_ms / 1000, tz=timezone.utc)
    return _timestamp(event["occurred_at"]) >= received - max_age


def xp_ledger(records: list[Delivered], topic: str = "player-rewards",
              max_age: timedelta = MAX_EVENT_AGE, extra: Extra = NO_EXTRA) -> dict[str, dict]:
    """The processed-messages ledger: each valid grant once per event_id, if any delivery of it
    arrived in time (a copy of an applied grant adds nothing, however late)."""
    ledger = {}
    for record, event in _valid_deliveries(records, topic, "player_id", extra):
        if arrived_in_time(record, event, max_age):
            ledger.setdefault(event["event_id"], event)
    return ledger


def late_events(records: list[Delivered], topic: str = "player-rewards",
                max_age: timedelta = MAX_EVENT_AGE) -> set[str]:
    """The event_ids of valid grants that arrived too late each time they were delivered: never
    applied, kept for a person."""
    applied = xp_ledger(records, topic, max_age)
    return {event["event_id"] for _, event in _valid_deliveries(records, topic, "player_id")
            if event["event_id"] not in applied}


def xp_totals(ledger: dict[str, dict]) -> dict[str, tuple[int, int]]:
    """player_id -> (total_xp, xp_events)."""
    totals: dict[str, tuple[int, int]] = {}
    for event in ledger.values():
        xp, count = totals.get(event["player_id"], (0, 0))
        totals[event["player_id"]] = (xp + event["xp"], count + 1)
    return totals


def quarantined_offsets(records: list[Delivered], topics: dict[str, str],
                        extra: Mapping[str, Extra] = NO_EXTRA) -> list[tuple]:
    """(topic, partition, offset) of every delivery that breaks the contract, one per delivery;
    `extra`: per Kafka topic, the optional fields its contract gained."""
    return sorted((r.topic, r.partition, r.offset) for r in records
                  if valid_event(r, topics[r.topic], extra.get(r.topic, NO_EXTRA)) is None)


def silver_deliveries(records: list[Delivered], topic: str, entity: str,
                      max_age: timedelta | None = None) -> set[tuple]:
    """What silver holds, one row each: (event_id, value, arrived late) of every valid delivery.

    `withWatermark(ingested_at, delay)` + `dropDuplicatesWithinWatermark` on (event_id, value's
    digest[, arrived_late]): the watermark follows when bronze ingested a record, so no valid
    delivery is ever behind it, and a copy of one already kept is dropped. That holds while
    every copy arrives within the delay of the first (true of any test run:
    docs/reference-model.md).
    `max_age`: the topic's max_event_age, None when silver marks no lateness.
    """
    return {(event["event_id"], record.payload,
             None if max_age is None else not arrived_in_time(record, event, max_age))
            for record, event in _valid_deliveries(records, topic, entity)}
