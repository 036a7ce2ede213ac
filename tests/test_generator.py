"""The generator's stream, checked by an independent reading of the records it returns."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import pytest

from exactly_once.kafka.generator import MALFORMED_KINDS, GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import KafkaRecord

ORDER_TYPES = {"order_created", "order_updated", "order_cancelled", "order_deleted"}
STATE = ("customer_id", "status", "amount", "currency")
CONFIG = GeneratorConfig(events=5000, orders=500, players=200, seed=7)


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


def defect(record: KafkaRecord) -> str | None:
    """Which contract rule the record breaks, or None for a valid event."""
    if record.key is None:
        return "key_missing"
    try:
        event = json.loads(record.payload)
    except ValueError:
        return "not_json"
    if "event_id" not in event:
        return "missing_event_id"
    if record.topic == "orders":
        if event["event_type"] not in ORDER_TYPES:
            return "unknown_event_type"
        if "sequence" not in event:
            return "missing_sequence"
        if type(event["sequence"]) is not int:
            return "sequence_not_integer"
    elif event["event_type"] != "xp_granted":
        return "unknown_event_type"
    elif event["xp"] <= 0:
        return "xp_not_positive"
    try:
        parse_time(event["occurred_at"])
    except ValueError:
        return "occurred_at_unparseable"
    return None


@pytest.fixture(scope="module")
def stream() -> list[KafkaRecord]:
    return generate_stream(CONFIG)


@pytest.fixture(scope="module")
def valid(stream) -> list[tuple[int, KafkaRecord, dict]]:
    """(publish position, record, parsed payload) of every well-formed record."""
    return [(i, r, json.loads(r.payload)) for i, r in enumerate(stream) if defect(r) is None]


@pytest.fixture(scope="module")
def originals(valid) -> dict[str, tuple[int, KafkaRecord, dict]]:
    """First publication of each event_id."""
    first: dict[str, tuple[int, KafkaRecord, dict]] = {}
    for item in valid:
        first.setdefault(item[2]["event_id"], item)
    return first


def test_same_seed_same_stream_other_seed_other_stream(stream):
    assert generate_stream(CONFIG) == stream
    assert generate_stream(GeneratorConfig(seed=8)) != stream


def test_every_original_event_is_published_and_rates_are_roughly_honored(stream, valid,
                                                                         originals):
    assert len(originals) == CONFIG.events
    attempts = Counter(dict(r.headers)["attempt"] for _, r, _ in valid)
    assert attempts["1"] - CONFIG.events == pytest.approx(0.2 * CONFIG.events, rel=0.1)
    assert attempts["2"] == pytest.approx(0.05 * CONFIG.events, rel=0.1)
    malformed = len(stream) - len(valid)
    assert malformed == pytest.approx(0.01 * CONFIG.events, rel=0.2)
    share = Counter(r.topic for _, r, _ in originals.values())["orders"] / CONFIG.events
    assert 0.5 < share < 0.6


def test_redeliveries_are_byte_identical_and_land_where_promised(stream, valid, originals):
    first_positions = sorted(position for position, _, _ in originals.values())
    for position, record, event in valid:
        first_position, first, _ = originals[event["event_id"]]
        if position == first_position:
            continue
        assert (record.topic, record.key, record.payload) == (first.topic, first.key,
                                                              first.payload)
        if dict(record.headers)["attempt"] == "1":  # a quick duplicate: headers identical too
            assert record.headers == first.headers
            later_originals = [p for p in first_positions if first_position < p < position]
            assert len(later_originals) <= 40
        else:  # a late redelivery, near the end of the stream
            assert position >= 0.85 * len(stream)


def test_orders_follow_their_lifecycle(originals):
    orders: dict[str, list[dict]] = defaultdict(list)
    for _, record, event in originals.values():
        if record.topic == "orders":
            assert record.key == event["order_id"]
            orders[record.key].append(event)
    assert len(orders) == CONFIG.orders
    delete_shapes = Counter()
    for events in orders.values():
        events.sort(key=lambda e: e["sequence"])
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        times = [parse_time(e["occurred_at"]) for e in events]
        assert times == sorted(times)
        assert events[0]["event_type"] == "order_created"
        types = [e["event_type"] for e in events]
        assert "order_deleted" not in types[:-1] and "order_created" not in types[1:]
        for event in events:
            if event["event_type"] != "order_deleted":
                assert all(field in event for field in STATE)
                assert str(float(event["amount"])) and len(event["amount"].split(".")[1]) == 2
        if types[-1] == "order_deleted":
            delete_shapes[all(field in events[-1] for field in STATE)] += 1
    assert sum(delete_shapes.values()) == pytest.approx(0.1 * CONFIG.orders, abs=5)
    assert delete_shapes[True] > 0 and delete_shapes[False] > 0


def test_some_orders_are_published_out_of_order_but_not_by_much(originals):
    last_seen: dict[str, dict] = {}
    inversions = 0
    for _, record, event in sorted(originals.values(), key=lambda item: item[0]):
        if record.topic != "orders":
            continue
        previous = last_seen.get(record.key)
        if previous is not None and previous["sequence"] > event["sequence"]:
            inversions += 1
            gap = parse_time(previous["occurred_at"]) - parse_time(event["occurred_at"])
            assert gap < timedelta(minutes=5)
        if previous is None or event["sequence"] > previous["sequence"]:
            last_seen[record.key] = event
    assert inversions == pytest.approx(0.1 * 0.55 * CONFIG.events, rel=0.2)


def test_every_malformed_kind_appears_with_fresh_event_ids(stream, originals):
    bad = [r for r in stream if defect(r) is not None]
    assert {defect(r) for r in bad} == set(MALFORMED_KINDS)
    for record in bad:
        try:
            event_id = json.loads(record.payload).get("event_id")
        except ValueError:
            continue
        assert event_id not in originals


def test_rewards_and_publish_metadata(stream, originals):
    rewards = [e for _, r, e in originals.values() if r.topic == "player-rewards"]
    assert all(e["xp"] > 0 and e["event_type"] == "xp_granted" for e in rewards)
    assert len({e["player_id"] for e in rewards}) <= CONFIG.players
    stamps = [r.timestamp_ms for r in stream]
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False))
    assert all(r.partition is None and r.offset is None for r in stream)
    assert all(dict(r.headers)["producer"] == "generator" for r in stream)


def test_a_tiny_stream_still_works():
    records = generate_stream(GeneratorConfig(events=20, orders=3, players=2, seed=1))
    assert sum(defect(r) is None for r in records) >= 20
