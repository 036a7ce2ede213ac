"""The event contract, enforced exactly (issue 10): each way Spark's lenient JSON parsing used to
let a record through silently altered is now quarantined with its reason, and nothing valid is
changed on its way into silver."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest
from helpers import kafka_rows, order, reward

from exactly_once.transforms.silver import parse_events, quarantined_records, valid_events

VALID = json.dumps(order("e1", "o1", 1))
# The helpers' events happen at 2026-11-21T10:00:00Z; Kafka stamps them a minute later.
KAFKA_TIME = datetime(2026, 11, 21, 10, 1, tzinfo=timezone.utc)


def delivered(spark, records):
    return kafka_rows(spark, records, timestamp=KAFKA_TIME)


def _with(field: str, raw: str) -> str:
    """The valid order with one field's JSON text replaced verbatim."""
    event = order("e1", "o1", 1)
    return "{" + ", ".join(f"{json.dumps(k)}: {raw if k == field else json.dumps(v)}"
                           for k, v in event.items()) + "}"


# The table: what silver stored before, and the reasons it is quarantined with now.
SILENTLY_ALTERED = [
    pytest.param(_with("status", '{"a": 1}'), ["invalid_status", "full_state_on_upsert"],
                 id="object as status (stored as the text {\"a\":1})"),
    pytest.param(_with("event_id", "42"), ["invalid_event_id", "has_event_id"],
                 id="number as event_id (stored as \"42\")"),
    pytest.param(_with("amount", '"129.999"'), ["invalid_amount_scale", "full_state_on_upsert"],
                 id="three decimal places (rounded to 130.00)"),
    pytest.param(VALID + " trailing", ["trailing_content"], id="trailing text (ignored)"),
    pytest.param(VALID + VALID, ["trailing_content"], id="two objects back to back"),
    pytest.param(VALID[:-1] + ', "sequence": 99}', ["duplicate_field"],
                 id="duplicate key (last one won)"),
    pytest.param(_with("occurred_at", "1793495733000"), ["invalid_occurred_at", "has_occurred_at"],
                 id="epoch millis (year 55840)"),
    pytest.param(_with("occurred_at", '"2026-11-02"'), ["invalid_occurred_at", "has_occurred_at"],
                 id="date without time (UTC assumed)"),
    pytest.param(_with("occurred_at", '"2026-11-02T10:00:00"'),
                 ["invalid_occurred_at", "has_occurred_at"], id="no zone (UTC assumed)"),
    pytest.param(VALID.replace('"e1"', '"e\xff1"').encode("latin-1"), ["invalid_utf8"],
                 id="non-UTF-8 byte in event_id (became U+FFFD)"),
]


@pytest.mark.parametrize("payload, errors", SILENTLY_ALTERED)
def test_what_lenient_parsing_let_through_is_quarantined_with_its_reason(spark, settings,
                                                                         payload, errors):
    orders = settings.topic("orders")
    parsed = parse_events(delivered(spark, [("orders", "o1", payload)]), orders)
    assert valid_events(parsed, orders).count() == 0
    (row,) = quarantined_records(parsed, orders).collect()
    assert row["errors"] == errors
    raw = payload if isinstance(payload, bytes) else payload.encode()
    kept = quarantined_records(parsed, orders).selectExpr("CAST(value AS BINARY)").first()[0]
    assert bytes(kept) == raw  # the raw value, byte for byte, whatever it holds


def test_valid_values_reach_silver_exactly_as_sent(spark, settings):
    orders = settings.topic("orders")
    sent = order("e\u00e9\U0001f600\u0000", "o1", 9223372036854775807, amount="129.9",
                 status='{"a": 1}', occurred_at="2026-11-20T23:30:00.123456-01:30")
    parsed = parse_events(delivered(spark, [("orders", "o1", sent)]), orders)
    (row,) = valid_events(parsed, orders).collect()
    assert row["event_id"] == sent["event_id"] and row["status"] == '{"a": 1}'  # a string stays
    assert row["sequence"] == 9223372036854775807 and row["amount"] == Decimal("129.90")
    assert row["occurred_at"].isoformat() == "2026-11-21T01:00:00.123456"  # UTC, same instant


@pytest.mark.parametrize("xp, errors", [
    (2147483647, []), (2147483648, ["invalid_xp", "positive_xp"]),
    (1.0, ["invalid_xp", "positive_xp"]), ("1e2", ["invalid_xp", "positive_xp"]),
    (True, ["invalid_xp", "positive_xp"]),
])
def test_xp_is_an_integer_literal_within_int(spark, settings, xp, errors):
    rewards = settings.topic("player_rewards")
    payload = json.dumps(reward("x1", "p1", 0)).replace('"xp": 0', f'"xp": {json.dumps(xp)}'
                                                       if xp != "1e2" else '"xp": 1e2')
    parsed = parse_events(delivered(spark, [("player-rewards", "p1", payload)]), rewards)
    assert [r["errors"] for r in parsed.collect()] == [errors]
