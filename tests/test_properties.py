"""Property-based: random event streams through the real pipeline, every table against the model.

Hypothesis builds a small stream of both topics (order lifecycles with deletes, equal-sequence
ties, exact redeliveries, reordering, late event times, malformed records, XP grants), Kafka
assigns offsets, the deliveries are cut into 1-3 runs (one kcat file and one pipeline update
each), and every table is compared with tests/reference.py. docs/testing.md has the details.

CI runs the hand-written stream `RICH` (an @example) and 1 generated stream, derandomized, so
always the same ones. EXACTLY_ONCE_PROPERTY_EXAMPLES=N runs N generated streams and makes them
random (reproduce a failure with the `--hypothesis-seed` pytest prints).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from hypothesis import HealthCheck, Phase, example, given, note, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from reference import (
    Delivered,
    current_orders,
    distinct_order_events,
    order_history,
    quarantined_offsets,
    silver_event_ids,
    valid_event,
    xp_ledger,
    xp_totals,
)

from exactly_once.config import load_settings
from exactly_once.kafka.kcat import KafkaRecord, write_kcat_jsonl
from exactly_once.local.auto_cdc import SEQUENCE
from exactly_once.local.pipeline import run_pipeline

EXAMPLES_KNOB = "EXACTLY_ONCE_PROPERTY_EXAMPLES"
EXAMPLES = int(os.environ.get(EXAMPLES_KNOB, "1"))
ORDERS, REWARDS = "orders", "player-rewards"
TOPICS = {ORDERS: "order_id", REWARDS: "player_id"}
WATERMARK = timedelta(minutes=10)  # conf/base.yml: topics.*.watermark_delay
# Event times near now (max_event_age, 30 days, is never crossed). "Recent" events happen within
# 5 minutes after BASE, so they never fall behind the 10-minute watermark; "late" ones 30-60
# minutes before it, so they do once a recent event has been seen. Late times are BASE minus a
# multiple of 7 seconds, so no two events are exactly the watermark delay (600 s) apart and no
# row sits exactly at the watermark (the model does not decide that case).
BASE = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=2)

MALFORMED = "malformed_json"  # a value that is not a JSON object fails only this check
STATUSES = ["created", "paid", "shipped"]
AMOUNTS = ["10.00", "25.50"]  # few values, so consecutive events often keep status and amount
CUSTOMERS = ["c1", "c2"]  # untracked by the history: a change updates a version in place


@dataclass(frozen=True)
class Event:
    topic: str
    key: str | None
    payload: str
    breaks: str | None = None  # for a malformed record: a rule (or parse check) it must fail


def at(seconds: int) -> str:
    return (BASE + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


@st.composite
def event_time(draw) -> str:
    if draw(st.integers(0, 5)) == 0:  # one in six is late
        return at(-1800 - 7 * draw(st.integers(0, 250)))
    return at(draw(st.integers(0, 300)))


@st.composite
def order_events(draw, order_id: str) -> list[dict]:
    """One order's lifecycle: sequences 1..n, maybe a delete (and a newer upsert after it),
    maybe a second, different event with the same sequence as another (a tie)."""
    n = draw(st.integers(1, 4))
    events = []

    def upsert(sequence: int, tag: str) -> dict:
        status = draw(st.sampled_from(STATUSES))
        cancelled = draw(st.integers(0, 5)) == 0
        return {"event_id": f"{order_id}-{tag}", "order_id": order_id, "sequence": sequence,
                "event_type": "order_cancelled" if cancelled else
                "order_created" if sequence == 1 else "order_updated",
                "occurred_at": draw(event_time()), "customer_id": draw(st.sampled_from(CUSTOMERS)),
                "status": "cancelled" if cancelled else status,
                "amount": draw(st.sampled_from(AMOUNTS)), "currency": "EUR"}

    for sequence in range(1, n + 1):
        events.append(upsert(sequence, str(sequence)))
    if draw(st.booleans()):
        events.append({"event_id": f"{order_id}-del", "event_type": "order_deleted",
                       "order_id": order_id, "sequence": n + 1,
                       "occurred_at": draw(event_time())})
        if draw(st.booleans()):  # re-created after the delete: newer, so it applies
            events.append(upsert(n + 2, "re"))
    if draw(st.booleans()):
        tied = draw(st.sampled_from(events))
        if tied["event_type"] == "order_deleted" or draw(st.booleans()):
            events.append(upsert(tied["sequence"], f"tie{tied['sequence']}"))
        else:  # a delete with the same sequence as an upsert
            events.append({"event_id": f"{order_id}-tiedel", "event_type": "order_deleted",
                           "order_id": order_id, "sequence": tied["sequence"],
                           "occurred_at": draw(event_time())})
    return events


def corrupt(draw, event: Event) -> Event:
    """A malformed delivery derived from a real event (same key and usually same event_id)."""
    payload = json.loads(event.payload)
    if event.topic == ORDERS:
        kinds = ["bad_json", "not_an_object", "no_event_id", "quoted_sequence", "null_sequence",
                 "negative_amount", "unknown_type", "no_status", "key_mismatch", "null_key",
                 "bad_time", "empty_event_id"]
    else:
        kinds = ["bad_json", "not_an_object", "no_event_id", "zero_xp", "negative_xp",
                 "quoted_xp", "unknown_type", "key_mismatch", "null_key", "bad_time"]
    kind = draw(st.sampled_from(kinds))
    key = event.key
    if kind == "bad_json":
        return Event(event.topic, key, event.payload[: len(event.payload) // 2], MALFORMED)
    if kind == "not_an_object":
        return Event(event.topic, key, json.dumps([payload.get("event_id")]), MALFORMED)
    if kind == "no_event_id":
        del payload["event_id"]
    elif kind == "empty_event_id":
        payload["event_id"] = ""
    elif kind == "quoted_sequence":
        payload["sequence"] = str(payload["sequence"])
    elif kind == "null_sequence":
        payload["sequence"] = None
    elif kind == "negative_amount":
        payload.update(event_type="order_updated", status="paid", customer_id="c1",
                       currency="EUR", amount="-1.00")
    elif kind == "unknown_type":
        payload["event_type"] = "order_shipped" if event.topic == ORDERS else "xp_revoked"
    elif kind == "no_status":
        payload.update(event_type="order_updated", customer_id="c1", currency="EUR",
                       amount="1.00")
        payload.pop("status", None)
    elif kind == "zero_xp":
        payload["xp"] = 0
    elif kind == "negative_xp":
        payload["xp"] = -payload["xp"]
    elif kind == "quoted_xp":
        payload["xp"] = str(payload["xp"])
    elif kind == "key_mismatch":
        key = f"{key}-other"
    elif kind == "null_key":
        key = None
    elif kind == "bad_time":
        payload["occurred_at"] = "yesterday"
    entity = "order_id" if event.topic == ORDERS else "player_id"
    breaks = {"no_event_id": "has_event_id", "empty_event_id": "has_event_id",
              "quoted_sequence": "invalid_sequence", "null_sequence": "has_sequence",
              "negative_amount": "non_negative_amount", "unknown_type": "known_event_type",
              "no_status": "full_state_on_upsert", "zero_xp": "positive_xp",
              "negative_xp": "positive_xp", "quoted_xp": "invalid_xp",
              "key_mismatch": f"key_matches_{entity}", "null_key": "has_key",
              "bad_time": "invalid_occurred_at"}[kind]
    return Event(event.topic, key, json.dumps(payload), breaks)


@dataclass
class Stream:
    runs: list[list[Delivered]]
    breaks: dict[tuple[str, int], str]  # (topic, offset) of a malformed record -> a rule it fails

    @property
    def deliveries(self) -> list[Delivered]:
        return [d for run in self.runs for d in run]


@st.composite
def streams(draw) -> Stream:
    events: list[Event] = []
    for o in range(draw(st.integers(2, 4))):
        events += [Event(ORDERS, e["order_id"], json.dumps(e))
                   for e in draw(order_events(f"o{o}"))]
    for p in range(draw(st.integers(2, 3))):
        for g in range(draw(st.integers(1, 3))):
            grant = {"event_id": f"p{p}-g{g}", "event_type": "xp_granted", "player_id": f"p{p}",
                     "xp": draw(st.integers(1, 50)), "reason": "quest",
                     "occurred_at": draw(event_time())}
            events.append(Event(REWARDS, f"p{p}", json.dumps(grant)))
    originals = list(events)
    events += draw(st.lists(st.sampled_from(originals), max_size=5))  # exact redeliveries
    events += [corrupt(draw, draw(st.sampled_from(originals)))
               for _ in range(draw(st.integers(0, 3)))]
    events = draw(st.permutations(events))  # any arrival order
    cuts = sorted(draw(st.sets(st.integers(1, len(events) - 1), max_size=2)))
    bounds = [0, *cuts, len(events)]
    return as_stream([events[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)])


def as_stream(runs: list[list[Event]]) -> Stream:
    """Kafka assigns the offsets, per topic, in arrival order (one partition)."""
    next_offset = {ORDERS: 0, REWARDS: 0}
    delivered, breaks = [], {}
    for run in runs:
        delivered.append([])
        for e in run:
            delivered[-1].append(Delivered(e.topic, 0, next_offset[e.topic], e.key, e.payload))
            if e.breaks:
                breaks[(e.topic, next_offset[e.topic])] = e.breaks
            next_offset[e.topic] += 1
    return Stream(delivered, breaks)


def order(event_id: str, order_id: str, sequence: int, status: str = "paid",
          amount: str = "10.00", seconds: int = 0, event_type: str = "order_updated",
          customer_id: str = "c1") -> Event:
    payload = {"event_id": event_id, "event_type": event_type, "order_id": order_id,
               "sequence": sequence, "occurred_at": at(seconds)}
    if event_type != "order_deleted":
        payload.update(customer_id=customer_id, status=status, amount=amount, currency="EUR")
    return Event(ORDERS, order_id, json.dumps(payload))


def grant(event_id: str, player_id: str, xp, seconds: int = 0, breaks: str | None = None) \
        -> Event:
    return Event(REWARDS, player_id, json.dumps({
        "event_id": event_id, "event_type": "xp_granted", "player_id": player_id, "xp": xp,
        "reason": "quest", "occurred_at": at(seconds)}), breaks)


# One hand-written stream that CI always runs: every case of the generator in two updates.
O1_2 = order("o1-2", "o1", 2, customer_id="c2", seconds=-1800)  # late: after the watermark
O2_TIE_A = order("o2-2", "o2", 2, status="paid", seconds=20)
P1_G1 = grant("p1-g1", "p1", 10, seconds=3)
RICH = as_stream([
    [order("o1-1", "o1", 1, event_type="order_created", seconds=10),
     order("o1-3", "o1", 3, status="shipped", seconds=30),  # before o1-2: out of order
     order("o2-1", "o2", 1, event_type="order_created", seconds=5),
     O2_TIE_A,
     order("o2-2b", "o2", 2, status="shipped", amount="25.50", seconds=21),  # tie: higher event_id
     order("o3-1", "o3", 1, event_type="order_created", seconds=1),
     order("o3-del", "o3", 2, event_type="order_deleted", seconds=40),
     order("o4-1", "o4", 1, event_type="order_created", seconds=2),
     order("o4-2", "o4", 2, amount="25.50", seconds=3),  # only the amount changes: a version
     order("o4-3", "o4", 3, amount="25.50", customer_id="c2", seconds=4),  # untracked: in place
     Event(ORDERS, "o1", O1_2.payload.replace('"sequence": 2', '"sequence": "2"'),
           "invalid_sequence"),  # a quoted integer
     Event(ORDERS, "o2", O2_TIE_A.payload[:30], MALFORMED),  # truncated JSON
     P1_G1,
     grant("p1-g2", "p1", 5, seconds=4),
     grant("p2-g1", "p2", 0, seconds=6, breaks="positive_xp"),
     grant("p2-g2", "p2", 3, seconds=7)],
    [O1_2,  # fills the gap between o1-1 and o1-3; same status and amount as o1-1
     O2_TIE_A,  # the tie's loser redelivered at a later offset: still loses, nothing changes
     order("o3-1", "o3", 1, event_type="order_created", seconds=1),  # older than the delete
     order("o3-re", "o3", 3, event_type="order_created", status="created", seconds=50),
     order("o1-1", "o1", 1, event_type="order_created", seconds=10),  # exact redelivery
     Event(REWARDS, None, P1_G1.payload, "has_key"),
     P1_G1,  # a redelivery in the next update: silver's state and the ledger both drop it
     grant("p2-g3", "p2", 4, seconds=-1900)],  # late: dropped by silver, applied by the ledger
])


def kafka_records(run: list[Delivered]) -> list[KafkaRecord]:
    return [KafkaRecord(d.topic, d.key, d.payload, partition=d.partition, offset=d.offset,
                        timestamp_ms=0) for d in run]


def run_through_pipeline(spark, stream: Stream, root: Path) -> dict[str, list]:
    inbox, warehouse = root / "inbox", root / "warehouse"
    inbox.mkdir()
    conf = load_settings("local", overrides={"exactly_once.source": f"file:{inbox}/*.jsonl"})
    for i, run in enumerate(stream.runs):
        write_kcat_jsonl(inbox / f"{i}.jsonl", kafka_records(run))
        run_pipeline(spark, conf, warehouse)
    tables = {name: spark.read.format("delta").load(str(warehouse / name)).collect()
              for name in ("bronze_kafka_events", "quarantine", "silver_orders",
                           "silver_player_rewards", "orders", "orders_history",
                           "player_xp_ledger", "player_xp", "late_events")}
    journal = warehouse / "_pipeline" / "auto_cdc" / "orders_history"  # the SCD2 state
    return tables | {"orders_history journal": spark.read.format("delta").load(str(journal))
                     .select("order_id", F.col(SEQUENCE).alias("sequence")).collect()}


def rank(struct) -> tuple | None:
    return None if struct is None else (struct["sequence"], struct["event_id"])


def order_row(row) -> tuple:
    return (row["event_id"], row["event_type"], row["sequence"], row["customer_id"],
            row["status"], row["amount"], row["currency"])


def order_event(event: dict) -> tuple:
    amount = None if event.get("amount") is None else \
        Decimal(str(event["amount"])).quantize(Decimal("0.01"))
    return (event["event_id"], event["event_type"], event["sequence"], event.get("customer_id"),
            event.get("status"), amount, event.get("currency"))


def assert_matches_model(tables: dict[str, list], stream: Stream) -> None:
    delivered = stream.deliveries

    assert sorted((r["topic"], r["partition"], r["offset"])
                  for r in tables["bronze_kafka_events"]) == sorted(
        (d.topic, d.partition, d.offset) for d in delivered), "bronze: every delivery once"

    assert sorted((r["kafka_topic"], r["kafka_partition"], r["kafka_offset"])
                  for r in tables["quarantine"]) == quarantined_offsets(delivered, TOPICS)
    errors = {(r["kafka_topic"], r["kafka_offset"]): r["errors"] for r in tables["quarantine"]}
    assert all(errors.values()) and all(r["reason"] for r in tables["quarantine"])
    for where, rule in stream.breaks.items():  # each malformed record names what it broke
        assert rule in errors[where] and (rule != MALFORMED or errors[where] == [MALFORMED]), \
            (where, rule, errors[where])

    for name, topic in [("silver_orders", ORDERS), ("silver_player_rewards", REWARDS)]:
        ids = [r["event_id"] for r in tables[name]]
        assert len(ids) == len(set(ids)), f"{name} holds an event_id twice"
        assert set(ids) == silver_event_ids(stream.runs, topic, TOPICS[topic], WATERMARK), name

    assert {r["order_id"]: order_row(r) for r in tables["orders"]} == {
        key: order_event(e) for key, e in current_orders(delivered, ORDERS).items()}, "orders"

    assert sorted((r["order_id"], rank(r["__START_AT"]), rank(r["__END_AT"]), *order_row(r))
                  for r in tables["orders_history"]) == sorted(
        (v.order_id, v.start, v.end, *order_event(v.event))
        for v in order_history(delivered, ORDERS)), "orders_history"
    journal = sorted((r["order_id"], rank(r["sequence"])) for r in tables["orders_history journal"])
    assert journal == distinct_order_events(delivered, ORDERS), "SCD2 journal: a row per event"

    ledger = xp_ledger(delivered, REWARDS)
    assert sorted((r["event_id"], r["player_id"], r["xp"]) for r in tables["player_xp_ledger"]) \
        == sorted((i, e["player_id"], e["xp"]) for i, e in ledger.items()), "player_xp_ledger"
    assert {r["player_id"]: (r["total_xp"], r["xp_events"]) for r in tables["player_xp"]} \
        == xp_totals(ledger), "player_xp"
    assert tables["late_events"] == [], "no grant is older than max_event_age"


def describe(stream: Stream) -> str:
    lines = []
    for i, run in enumerate(stream.runs):
        lines.append(f"run {i}:")
        lines += [f"  {d.topic}@{d.offset} key={d.key} "
                  f"{'VALID' if valid_event(d, TOPICS[d.topic]) else 'INVALID'} {d.payload}"
                  for d in run]
    return "\n".join(lines)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES_KNOB not in os.environ,
          database=None, phases=[Phase.explicit, Phase.generate],  # no shrinking: Spark is slow
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(stream=streams())
@example(stream=RICH)
def test_the_pipeline_matches_the_reference_model(spark, stream):
    note(describe(stream))
    root = Path(tempfile.mkdtemp(prefix="exactly-once-property-"))
    try:
        assert_matches_model(run_through_pipeline(spark, stream, root), stream)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- The model against itself: cheap, so many examples --------------------------------------


@settings(max_examples=300, deadline=None)
@given(stream=streams())
def test_the_models_history_agrees_with_its_current_state(stream):
    delivered = stream.deliveries
    current = {v.order_id: v.event for v in order_history(delivered, ORDERS) if v.end is None}
    assert current == current_orders(delivered, ORDERS)
