"""A deterministic synthetic stream with every kind of at-least-once redelivery.

Two topics, JSON payloads, keyed by entity id:

* `orders` (key = order_id): order_created, order_updated*, [order_cancelled], [order_deleted].
  Each order's `sequence` is 1, 2, 3, ... in occurred_at order. Every non-delete event carries
  the order's full state (customer_id, status, amount as a decimal string, currency).
  order_deleted is always the last (highest-sequence) event of its order; deleted orders
  alternate between carrying the full state (status "deleted") and carrying none of it.
* `player-rewards` (key = player_id): xp_granted events with xp > 0, to be summed per player.

Starting from `events` original events (~55% orders, 45% rewards; occurred_at advances 1-5 s
per event from `start`; an order's events cluster within a few minutes), the stream adds:

* duplicates: `duplicate_rate` of originals are re-published shortly after (at most 40
  originals later) as exact copies (key, payload bytes, headers): a producer retry;
* late redeliveries: `late_redelivery_rate` of originals (from the first 80% of the stream)
  are re-published in the last ~10% of it, same key and payload bytes, header attempt="2";
* out of order: `out_of_order_rate` of order events swap publish position with the next event
  of the same order, so a higher sequence is published first (by at most a few minutes of event
  time); occurred_at and sequence keep their true values;
* deletes: `delete_rate` of orders end with order_deleted;
* malformed: `malformed_rate` x events *extra* records, cycling through MALFORMED_KINDS so every
  kind appears once there are 8 or more; each has a fresh event_id where it has one.

Every record has headers ("producer", "generator"), ("attempt", "1" or "2"); timestamp_ms is its
publish time (strictly increasing in publish order). Partition and offset are left to Kafka.
Same config and seed -> the same records, byte for byte.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from exactly_once.kafka.kcat import KafkaRecord

MALFORMED_KINDS = (
    "not_json", "missing_event_id", "unknown_event_type", "missing_sequence",
    "sequence_not_integer", "xp_not_positive", "occurred_at_unparseable", "key_missing",
)
ORDER_STATUSES = ("paid", "packed", "shipped", "delivered")
CURRENCIES = ("EUR", "USD", "GBP")
REASONS = ("quest_completed", "level_up", "daily_login", "achievement", "tournament_win")
CANCEL_RATE = 0.15
MAX_ORDER_GAP = 30  # max order events between two events of one order: keeps lifecycles short


@dataclass
class GeneratorConfig:
    events: int = 5000
    orders: int = 500
    players: int = 200
    duplicate_rate: float = 0.2
    late_redelivery_rate: float = 0.05
    out_of_order_rate: float = 0.1
    delete_rate: float = 0.1
    malformed_rate: float = 0.01
    seed: int = 0
    start: datetime = datetime(2026, 11, 1, tzinfo=timezone.utc)
    orders_topic: str = "orders"
    rewards_topic: str = "player-rewards"


@dataclass(frozen=True)
class _Event:
    topic: str
    key: str
    body: dict  # the payload minus event_id and occurred_at, which placement assigns


def iso_millis(moment: datetime) -> str:
    """2026-11-21T10:00:00.123Z: the contract's occurred_at format."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _amount(rng: random.Random) -> str:
    """A decimal string with exactly two places, e.g. "129.90" (never a float)."""
    cents = rng.randint(500, 50_000)
    return f"{cents // 100}.{cents % 100:02d}"


def _headers(attempt: int) -> tuple[tuple[str, str], ...]:
    return (("producer", "generator"), ("attempt", str(attempt)))


def _lifecycle(rng: random.Random, order_id: str, length: int, deleted: bool,
               delete_with_state: bool) -> list[dict]:
    """Bodies of one order's events, in sequence order."""
    state = {"customer_id": f"c-{rng.randint(1, 10_000):05d}", "status": "created",
             "amount": _amount(rng), "currency": rng.choice(CURRENCIES)}
    changes = length - 1 - int(deleted)  # events between created and the optional delete
    cancelled = changes >= 1 and rng.random() < CANCEL_RATE
    bodies = [{"event_type": "order_created", **state}]
    for i in range(1, changes + 1):
        if cancelled and i == changes:
            state = {**state, "status": "cancelled"}
            bodies.append({"event_type": "order_cancelled", **state})
            continue
        state = {**state, "status": ORDER_STATUSES[min(i, len(ORDER_STATUSES)) - 1]}
        if rng.random() < 0.3:
            state["amount"] = _amount(rng)
        bodies.append({"event_type": "order_updated", **state})
    if deleted:
        tail = {**state, "status": "deleted"} if delete_with_state else {}
        bodies.append({"event_type": "order_deleted", **tail})
    return [{"order_id": order_id, "sequence": n, **b} for n, b in enumerate(bodies, start=1)]


def _order_events(config: GeneratorConfig, rng: random.Random, total: int) -> list[_Event]:
    """`total` order events; each order's events close together, sequences in order."""
    count = min(config.orders, total)
    lengths = [1] * count
    deleted = rng.sample(range(count), min(round(config.delete_rate * count), total - count))
    for i in deleted:
        lengths[i] += 1  # a deleted order needs at least order_created before its delete
    for _ in range(total - sum(lengths)):
        lengths[rng.randrange(count)] += 1
    deleted_rank = {order: rank for rank, order in enumerate(sorted(deleted))}
    placed = []
    for i, length in enumerate(lengths):
        order_id = f"o-{i + 1:05d}"
        rank = deleted_rank.get(i)
        with_state = rank is not None and rank % 2 == 0  # so both delete shapes occur
        bodies = _lifecycle(rng, order_id, length, rank is not None, with_state)
        position = rng.uniform(0, total)
        for body in bodies:
            placed.append((position, i, body["sequence"], body))
            position += rng.uniform(1, MAX_ORDER_GAP)
    placed.sort(key=lambda p: p[:3])
    return [_Event(config.orders_topic, b["order_id"], b) for *_, b in placed]


def _reward_events(config: GeneratorConfig, rng: random.Random, total: int) -> list[_Event]:
    events = []
    for _ in range(total):
        player_id = f"p-{rng.randint(1, config.players):05d}"
        body = {"event_type": "xp_granted", "player_id": player_id,
                "xp": rng.randint(1, 500), "reason": rng.choice(REASONS)}
        events.append(_Event(config.rewards_topic, player_id, body))
    return events


def _payload(event_id: str | None, occurred_at: str, body: dict) -> dict:
    """Contract field order: event_id, event_type, entity id, sequence, occurred_at, rest."""
    head = {"event_id": event_id} if event_id is not None else {}
    first = {k: body[k] for k in ("event_type", "order_id", "player_id", "sequence") if k in body}
    rest = {k: v for k, v in body.items() if k not in first}
    return {**head, **first, "occurred_at": occurred_at, **rest}


def _originals(config: GeneratorConfig, rng: random.Random) -> list[tuple[KafkaRecord, int]]:
    """Original records in event-time order, each with its occurred_at in epoch millis."""
    n_orders = round(config.events * 0.55) if config.orders > 0 else 0
    orders = iter(_order_events(config, rng, n_orders))
    rewards = iter(_reward_events(config, rng, config.events - n_orders))
    kinds = [True] * n_orders + [False] * (config.events - n_orders)
    rng.shuffle(kinds)
    moment, records = config.start, []
    for is_order in kinds:
        moment += timedelta(milliseconds=rng.randint(1000, 5000))
        event = next(orders) if is_order else next(rewards)
        payload = _payload(_uuid(rng), iso_millis(moment), event.body)
        record = KafkaRecord(event.topic, event.key, json.dumps(payload), headers=_headers(1))
        records.append((record, int(moment.timestamp() * 1000)))
    return records


def _swap_out_of_order(records: list[tuple[KafkaRecord, int]], config: GeneratorConfig,
                       rng: random.Random) -> None:
    """Swaps chosen order events with the next event of the same order, in place."""
    positions: dict[str, list[int]] = {}
    for i, (record, _) in enumerate(records):
        if record.topic == config.orders_topic and record.key is not None:
            positions.setdefault(record.key, []).append(i)
    pairs = [(a, b) for p in positions.values() for a, b in zip(p, p[1:], strict=False)]
    target = round(config.out_of_order_rate * sum(len(p) for p in positions.values()))
    rng.shuffle(pairs)
    used: set[int] = set()
    for a, b in pairs:
        if target == 0:
            break
        if a in used or b in used:
            continue  # each event moves at most once, so displacement stays one hop
        records[a], records[b] = records[b], records[a]
        used.update((a, b))
        target -= 1


def _malformed(config: GeneratorConfig, rng: random.Random, kind: str) -> KafkaRecord:
    """One bad record of the given kind; otherwise shaped like a real event."""
    on_rewards = kind == "xp_not_positive" or (
        kind not in ("missing_sequence", "sequence_not_integer") and rng.random() < 0.5)
    if on_rewards:
        key = f"p-{rng.randint(1, max(config.players, 1)):05d}"
        body = {"event_type": "xp_granted", "player_id": key, "xp": rng.randint(1, 500),
                "reason": rng.choice(REASONS)}
    else:
        key = f"o-{rng.randint(1, max(config.orders, 1)):05d}"
        sequence = rng.randint(1, 99)
        body = {"event_type": "order_updated", "order_id": key, "sequence": sequence,
                "customer_id": "c-00000", "status": "paid", "amount": _amount(rng),
                "currency": "EUR"}
    occurred_at = iso_millis(config.start)
    event_id: str | None = _uuid(rng)
    if kind == "not_json":
        topic = config.rewards_topic if on_rewards else config.orders_topic
        return KafkaRecord(topic, key, f"{key};corrupt{{{rng.randint(0, 999)}", headers=_headers(1))
    if kind == "missing_event_id":
        event_id = None
    elif kind == "unknown_event_type":
        body["event_type"] = "xp_revoked" if on_rewards else "order_teleported"
    elif kind == "missing_sequence":
        del body["sequence"]
    elif kind == "sequence_not_integer":
        body["sequence"] = rng.choice([str(sequence), sequence + 0.5])
    elif kind == "xp_not_positive":
        body["xp"] = -rng.randint(0, 50)
    elif kind == "occurred_at_unparseable":
        occurred_at = rng.choice(["yesterday", "2026-13-45T99:00:00Z", ""])
    topic = config.rewards_topic if on_rewards else config.orders_topic
    payload = json.dumps(_payload(event_id, occurred_at, body))
    return KafkaRecord(topic, None if kind == "key_missing" else key, payload, headers=_headers(1))


def generate_stream(config: GeneratorConfig) -> list[KafkaRecord]:
    """The full stream in publish order (see the module docstring for its semantics)."""
    rng = random.Random(config.seed)
    originals = _originals(config, rng)
    _swap_out_of_order(originals, config, rng)
    n = len(originals)
    extras: dict[int, list[tuple[KafkaRecord, int | None]]] = {}  # publish after original i
    for i in rng.sample(range(n), round(config.duplicate_rate * n)):
        extras.setdefault(min(i + rng.randint(1, 40), n - 1), []).append((originals[i][0], None))
    early = int(n * 0.8)
    for i in rng.sample(range(early), min(early, round(config.late_redelivery_rate * n))):
        late = replace(originals[i][0], headers=_headers(2))
        extras.setdefault(rng.randint(int(n * 0.9), n - 1), []).append((late, None))
    for k in range(round(config.malformed_rate * n)):
        bad = _malformed(config, rng, MALFORMED_KINDS[k % len(MALFORMED_KINDS)])
        extras.setdefault(rng.randrange(n), []).append((bad, None))
    stream, last_ms = [], 0
    for i, original in enumerate(originals):
        for record, occurred_ms in [original, *extras.get(i, [])]:
            # Published shortly after it occurred, never before the previous record.
            last_ms = max(last_ms + rng.randint(1, 50), (occurred_ms or 0) + rng.randint(5, 200))
            stream.append(replace(record, timestamp_ms=last_ms))
    return stream
