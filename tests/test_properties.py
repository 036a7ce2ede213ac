"""Property-based: random event streams through the real pipeline, every table against the model.

Hypothesis builds a small stream of both topics (order lifecycles with deletes, equal-sequence
ties, exact redeliveries, reordering, late event times, events and deliveries older than
max_event_age by their Kafka timestamps, malformed records, XP grants), Kafka assigns offsets
and timestamps, the deliveries are cut into 1-3 runs, and the same log is fed to the pipeline
six ways: one update per run (every table checked against tests/reference.py), (a) all at once,
(b) through a real broker in micro-batches of a few offsets over the runs' updates, (c) with a
full refresh before the last update, (d) with one AUTO CDC checkpoint deleted before it, and
(e) shifted 120 days into the past (the pipeline's clock months ahead of the log). The gold
tables must be identical in all of them and equal to the model. docs/reference-model.md has details.

Every Hypothesis example is ONE log: the hand-written stream `RICH` plus generated streams, each
under key prefixes of its own (`batches` says why that checks each of them). CI runs one
example (RICH + 1 generated stream, derandomized, so always the same ones) in 8 pipeline
updates; EXACTLY_ONCE_PROPERTY_EXAMPLES=N runs N generated streams, up to 4 per log, and makes
them random (reproduce a failure with the `--hypothesis-seed` pytest prints).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from events import (
    ORDERS,
    REWARDS,
    Clock,
    Event,
    as_logged,
    grant,
    iso,
    kafka_records,
    order,
)
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from reference import (
    MAX_EVENT_AGE,
    Delivered,
    current_orders,
    distinct_order_events,
    late_events,
    order_history,
    quarantined_offsets,
    rank_of,
    silver_deliveries,
    valid_event,
    xp_ledger,
    xp_totals,
)

from exactly_once.kafka.admin import ensure_topics
from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.kafka.producer import produce_records
from exactly_once.local.auto_cdc.changes import SEQUENCE
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.inspect.delivery import utc
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.settings.pipeline import load_settings

EXAMPLES_KNOB = "EXACTLY_ONCE_PROPERTY_EXAMPLES"
EXAMPLES = int(os.environ.get(EXAMPLES_KNOB, "1"))  # generated streams in all
# Generated streams per Hypothesis example: they and RICH go through the pipeline as one log
# (see `batches`), so N streams cost ceil(N / 4) examples' updates, not N + 1.
STREAMS_PER_EXAMPLE = min(EXAMPLES, 4)
EXAMPLES_RUN = -(-EXAMPLES // STREAMS_PER_EXAMPLE)
TOPICS = {ORDERS: "order_id", REWARDS: "player_id"}
# Event times near now (max_event_age, 30 days, is never crossed). "Recent" events happen within
# 5 minutes after CLOCK.start; "late" ones 30-60 minutes before it, more than silver's 10-minute
# watermark delay behind the recent ones: an event-time watermark would drop them once a recent
# event has been seen, silver's (by ingestion time) never does. Late times are CLOCK.start minus
# a multiple of 7 seconds, so no two events are exactly 600 s apart.
CLOCK = Clock.ago(hours=2)
# Kafka timestamps: the broker receives the i-th delivery at LOG_START + i seconds (after every
# recent event), or, for a delivery drawn as `late_by_log`, LATE_BY_LOG after that
# (events.as_logged): past max_event_age (30 days).
# "Ancient" events happened 45 days before CLOCK.start: every delivery of them is past
# max_event_age.
LOG_START = CLOCK.start + timedelta(minutes=10)
ANCIENT = -45 * 24 * 3600
SHIFT = timedelta(days=120)  # variant (e): the whole log this much older
GOLD = ("orders", "orders_history", "player_xp_ledger", "player_xp", "late_events")
AUTO_CDC_FLOWS = ("orders", "orders_history", "player_xp_ledger", "late_events")

MALFORMED = "malformed_json"  # a value that is not a JSON object fails only this check
STATUSES = ["created", "paid", "shipped"]
AMOUNTS = ["10.00", "25.50"]  # few values, so consecutive events often keep status and amount
CUSTOMERS = ["c1", "c2"]  # untracked by the history: a change updates a version in place


@st.composite
def event_time(draw) -> str:
    kind = draw(st.integers(0, 11))
    if kind < 2:  # one in six is late
        return CLOCK.at(-1800 - 7 * draw(st.integers(0, 250)))
    if kind == 2:  # one in twelve is older than max_event_age when any broker receives it
        return CLOCK.at(ANCIENT - 7 * draw(st.integers(0, 250)))
    return CLOCK.at(draw(st.integers(0, 300)))


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
    # How variants (b) and (d) feed it: the broker's micro-batch size, the checkpoints deleted.
    max_offsets_per_trigger: int = 2
    reset_flows: frozenset[str] = frozenset({"late_events"})

    @property
    def deliveries(self) -> list[Delivered]:
        return [d for run in self.runs for d in run]


@st.composite
def event_runs(draw, prefix: str = "") -> list[list[Event]]:
    """One stream's deliveries, cut into 1-3 runs; every order, player and event_id starts with
    `prefix`, so streams with different prefixes share no key and no event."""
    events: list[Event] = []
    for o in range(draw(st.integers(2, 4))):
        events += [Event.of(e) for e in draw(order_events(f"{prefix}o{o}"))]
    for p in range(draw(st.integers(2, 3))):
        for g in range(draw(st.integers(1, 3))):
            events.append(Event.of(grant(f"{prefix}p{p}-g{g}", f"{prefix}p{p}",
                                         draw(st.integers(1, 50)),
                                         occurred_at=draw(event_time()))))
    originals = list(events)
    events += draw(st.lists(st.sampled_from(originals), max_size=5))  # exact redeliveries
    events += [corrupt(draw, draw(st.sampled_from(originals)))
               for _ in range(draw(st.integers(0, 3)))]
    # One delivery in eight reaches the broker LATE_BY_LOG later: a first delivery that is too
    # late, or a redelivery of a grant that was applied in time.
    events = [replace(e, late_by_log=draw(st.integers(0, 7)) == 0) for e in events]
    events = draw(st.permutations(events))  # any arrival order
    cuts = sorted(draw(st.sets(st.integers(1, len(events) - 1), max_size=2)))
    bounds = [0, *cuts, len(events)]
    return [events[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@st.composite
def streams(draw) -> Stream:
    return as_stream(draw(event_runs()))


def one_log(logs: list[list[list[Event]]]) -> list[list[Event]]:
    """Several streams as one log: run i holds run i of each stream, one stream after another."""
    return [[e for runs in logs if i < len(runs) for e in runs[i]]
            for i in range(max(len(runs) for runs in logs))]


@st.composite
def batches(draw, generated: int) -> Stream:
    """RICH and `generated` generated streams, each under a prefix of its own, as ONE log.

    Why one log is as good as a log per stream: the streams share no order, player or event_id,
    and every table is a function of each key's (or event_id's, or delivery's) own records, in
    the pipeline as in the model (tests/reference.py). So the union's tables are the union of
    each stream's, and checking the union against the model checks every stream against it.
    What the streams do share (Kafka offsets, micro-batch boundaries, the updates) is what the
    property says cannot matter. Each variant then costs its updates once per batch instead of
    once per stream: a pipeline update has a fixed cost of many seconds, a few more records
    almost none.
    """
    logs = [RICH_RUNS] + [draw(event_runs(f"s{i}-")) for i in range(generated)]
    # 1-4 offsets per micro-batch, 2 first: Hypothesis's first example (CI's) draws the first.
    return replace(as_stream(one_log(logs)),
                   max_offsets_per_trigger=draw(st.sampled_from([2, 1, 3, 4])),
                   # RICH's "late_events" and a drawn one: the AUTO CDC flows read silver, never
                   # each other's state or target, so deleting two checkpoints is each deletion
                   # on its own, in one update.
                   reset_flows=frozenset({"late_events", draw(st.sampled_from(AUTO_CDC_FLOWS))}))


def as_stream(runs: list[list[Event]]) -> Stream:
    """Kafka assigns the offsets, per topic, in arrival order (one partition), and timestamps."""
    logged = as_logged(runs, LOG_START)
    breaks = {(d.topic, d.offset): e.breaks for run, stored in zip(runs, logged, strict=True)
              for e, d in zip(run, stored, strict=True) if e.breaks}
    return Stream(logged, breaks)


# One hand-written stream that CI always runs: every case of the generator in two updates.
O1_2 = Event.of(order("o1-2", "o1", 2, customer_id="c2",
                      occurred_at=CLOCK.at(-1800)))  # late event time
O2_TIE_A = Event.of(order("o2-2", "o2", 2, status="paid", occurred_at=CLOCK.at(20)))
P1_G1 = Event.of(grant("p1-g1", "p1", 10, occurred_at=CLOCK.at(3)))
P3_G1 = Event.of(grant("p3-g1", "p3", 8, occurred_at=CLOCK.at(9)))
RICH_RUNS = [
    [Event.of(order("o1-1", "o1", 1, event_type="order_created", occurred_at=CLOCK.at(10))),
     Event.of(order("o1-3", "o1", 3, status="shipped",
                    occurred_at=CLOCK.at(30))),  # before o1-2: out of order
     Event.of(order("o2-1", "o2", 1, event_type="order_created", occurred_at=CLOCK.at(5))),
     O2_TIE_A,
     Event.of(order("o2-2b", "o2", 2, status="shipped", amount="25.50",
                    occurred_at=CLOCK.at(21))),  # tie: higher event_id
     Event.of(order("o3-1", "o3", 1, event_type="order_created", occurred_at=CLOCK.at(1))),
     Event.of(order("o3-del", "o3", 2, event_type="order_deleted", occurred_at=CLOCK.at(40))),
     Event.of(order("o4-1", "o4", 1, event_type="order_created", occurred_at=CLOCK.at(2))),
     Event.of(order("o4-2", "o4", 2, amount="25.50",
                    occurred_at=CLOCK.at(3))),  # only the amount changes: a version
     Event.of(order("o4-3", "o4", 3, amount="25.50", customer_id="c2",
                    occurred_at=CLOCK.at(4))),  # untracked: in place
     Event(ORDERS, "o1", O1_2.payload.replace('"sequence": 2', '"sequence": "2"'),
           "invalid_sequence"),  # a quoted integer
     Event(ORDERS, "o2", O2_TIE_A.payload[:30], MALFORMED),  # truncated JSON
     P1_G1,
     Event.of(grant("p1-g2", "p1", 5, occurred_at=CLOCK.at(4))),
     Event.of(grant("p2-g1", "p2", 0, occurred_at=CLOCK.at(6)), breaks="positive_xp"),
     Event.of(grant("p2-g2", "p2", 3, occurred_at=CLOCK.at(7))),
     Event.of(grant("p3-old", "p3", 100,
                    occurred_at=CLOCK.at(ANCIENT))),  # older than max_event_age: late_events
     replace(P3_G1, late_by_log=True)],  # its first delivery is too late: late_events, for now
    [O1_2,  # fills the gap between o1-1 and o1-3; same status and amount as o1-1
     O2_TIE_A,  # the tie's loser redelivered at a later offset: still loses, nothing changes
     Event.of(order("o3-1", "o3", 1, event_type="order_created",
                    occurred_at=CLOCK.at(1))),  # older than the delete
     Event.of(order("o3-re", "o3", 3, event_type="order_created", status="created",
                    occurred_at=CLOCK.at(50))),
     Event.of(order("o1-1", "o1", 1, event_type="order_created",
                    occurred_at=CLOCK.at(10))),  # exact redelivery
     Event(REWARDS, None, P1_G1.payload, "has_key"),
     P1_G1,  # a redelivery in the next update: silver's state and the ledger both drop it
     Event.of(grant("p2-g3", "p2", 4,
                    occurred_at=CLOCK.at(-1900))),  # late event time: kept by silver, applied
     P3_G1,  # a delivery in time after the late one: applied, and no longer a late event
     replace(P1_G1, late_by_log=True)],  # an applied grant redelivered too late: nothing
]


def run_updates(spark, runs: list[list[Delivered]], root: Path,
                forks: dict[str, Callable[[Path], dict]] | None = None) -> dict[str, Path]:
    """One kcat file and one update per run, into `root/warehouse` (key "").

    Each fork `name: before_last` gets the same updates but the last: a copy of the warehouse
    before it (`root/name`), on which `before_last(copy)` may act, and whose return value are
    the run_pipeline options of its last update. The copy stands for running the same updates
    again into a warehouse of its own (what the variants did before): the same files give the
    same tables, and the copy costs no update. The inbox is shared: the file source's
    checkpoint names the files it read by path.
    """
    inbox, warehouse = root / "inbox", root / "warehouse"
    inbox.mkdir(parents=True)
    conf = load_settings("local", overrides={"exactly_once.source": f"file:{inbox}/*.jsonl"})
    warehouses = {"": warehouse} | {name: root / name for name in forks or {}}
    for i, run in enumerate(runs):
        if i == len(runs) - 1:
            for name in forks or {}:
                shutil.copytree(warehouse, warehouses[name])
        write_kcat_jsonl(inbox / f"{i}.jsonl", kafka_records(run))
        run_pipeline(spark, conf, warehouse)
    for name, before_last in (forks or {}).items():
        run_pipeline(spark, conf, warehouses[name], **before_last(warehouses[name]))
    return warehouses


def run_through_broker(spark, runs: list[list[Delivered]], root: Path, bootstrap: str,
                       max_offsets_per_trigger: int) -> Path:
    """The runs published to topics of their own (one partition: the offsets the model gave
    them, with their timestamps as CreateTime), one update after each, in micro-batches of at
    most `max_offsets_per_trigger` offsets."""
    suffix = uuid.uuid4().hex[:8]
    topics = {ORDERS: f"prop-orders-{suffix}", REWARDS: f"prop-rewards-{suffix}"}
    ensure_topics(bootstrap, dict.fromkeys(topics.values(), 1))
    conf = load_settings("local", overrides={
        "exactly_once.source": "kafka", "exactly_once.kafka.bootstrap_servers": bootstrap,
        "exactly_once.kafka.max_offsets_per_trigger": str(max_offsets_per_trigger),
        "exactly_once.topics.orders.topic": topics[ORDERS],
        "exactly_once.topics.player_rewards.topic": topics[REWARDS]})
    warehouse = root / "warehouse"
    for run in runs:
        produce_records(bootstrap, kafka_records(run, topics))
        run_pipeline(spark, conf, warehouse)
    return warehouse


def shifted(runs: list[list[Delivered]], by: timedelta) -> list[list[Delivered]]:
    """The same log, every event time and Kafka timestamp moved by `by`."""
    def move(d: Delivered) -> Delivered:
        try:
            payload = json.loads(d.payload)
            moment = datetime.fromisoformat(payload["occurred_at"].replace("Z", "+00:00"))
            payload["occurred_at"] = iso(moment + by)
            text = json.dumps(payload)
        except (ValueError, TypeError, KeyError, AttributeError):
            text = d.payload  # not an event with a time: unchanged
        return replace(d, payload=text,
                       timestamp_ms=d.timestamp_ms + int(by.total_seconds() * 1000))
    return [[move(d) for d in run] for run in runs]


def canonical(spark, warehouse: Path, shift: timedelta = timedelta()) -> dict[str, list]:
    """The gold tables as sorted plain values, times moved by `shift` (to undo a shifted log);
    read as `read_tables` reads them."""
    def plain(value):
        if isinstance(value, datetime):
            # Spark hands timestamps over as naive local times: shifted as instants (`utc`), since
            # a naive local time plus 120 days is an hour off across a daylight-saving change.
            return utc(value) + shift
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    tables = {}
    for name in GOLD:
        rows = []
        for row in read_latest(spark, str(warehouse / name)).collect():
            values = plain(row.asDict(recursive=True))
            if "event" in values:  # late_events: the event as JSON text
                event = json.loads(values["event"])
                moment = datetime.fromisoformat(event["occurred_at"].replace("Z", "+00:00"))
                event["occurred_at"] = (moment + shift).isoformat()
                values["event"] = event
            rows.append(values)
        tables[name] = sorted(rows, key=repr)
    return tables


def at_least_two(runs: list[list[Delivered]]) -> list[list[Delivered]]:
    """Variants that act between updates need two: a single run is cut in half."""
    if len(runs) > 1:
        return runs
    half = len(runs[0]) // 2
    return [runs[0][:half], runs[0][half:]]


def read_tables(spark, warehouse: Path) -> dict[str, list]:
    """The tables the model checks. Read as the Parquet files each table's log names, as
    `canonical` reads them: a tenth of Delta's reader's cost for a table the session has not
    read at its version, and the same rows (test_crash_sweep checks it on every kind of table
    the pipeline writes)."""
    tables = {name: read_latest(spark, str(warehouse / name)).collect()
              for name in ("bronze_kafka_events", "quarantine", "silver_orders",
                           "silver_player_rewards", "orders", "orders_history",
                           "player_xp_ledger", "player_xp", "late_events")}
    journal = warehouse / "_pipeline" / "auto_cdc" / "orders_history"  # the SCD2 state
    return tables | {"orders_history journal": read_latest(spark, str(journal))
                     .select("order_id", F.col(SEQUENCE).alias("sequence")).collect()}


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

    for name, topic, max_age in [("silver_orders", ORDERS, None),
                                 ("silver_player_rewards", REWARDS, MAX_EVENT_AGE)]:
        rows = [(r["event_id"], r["arrived_late"] if max_age else None) for r in tables[name]]
        expected = silver_deliveries(delivered, topic, TOPICS[topic], max_age)
        assert set(rows) == {(event_id, late) for event_id, _, late in expected}, name
        assert len(rows) == len(expected), f"{name}: a redelivery within the watermark"

    assert {r["order_id"]: order_row(r) for r in tables["orders"]} == {
        key: order_event(e) for key, e in current_orders(delivered, ORDERS).items()}, "orders"

    assert sorted((r["order_id"], rank_of(r["__START_AT"]), rank_of(r["__END_AT"]), *order_row(r))
                  for r in tables["orders_history"]) == sorted(
        (v.order_id, v.start, v.end, *order_event(v.event))
        for v in order_history(delivered, ORDERS)), "orders_history"
    journal = sorted((r["order_id"], rank_of(r["sequence"]))
                     for r in tables["orders_history journal"])
    assert journal == distinct_order_events(delivered, ORDERS), "SCD2 journal: a row per event"

    ledger = xp_ledger(delivered, REWARDS)
    assert sorted((r["event_id"], r["player_id"], r["xp"]) for r in tables["player_xp_ledger"]) \
        == sorted((i, e["player_id"], e["xp"]) for i, e in ledger.items()), "player_xp_ledger"
    assert {r["player_id"]: (r["total_xp"], r["xp_events"]) for r in tables["player_xp"]} \
        == xp_totals(ledger), "player_xp"
    assert {r["event_id"] for r in tables["late_events"]} == late_events(delivered, REWARDS), \
        "late_events"


def describe(stream: Stream) -> str:
    lines = [f"max_offsets_per_trigger={stream.max_offsets_per_trigger}, "
             f"checkpoints deleted: {', '.join(sorted(stream.reset_flows))}"]
    for i, run in enumerate(stream.runs):
        lines.append(f"run {i}:")
        lines += [f"  {d.topic}@{d.offset} key={d.key} "
                  f"{'VALID' if valid_event(d, TOPICS[d.topic]) else 'INVALID'} {d.payload}"
                  for d in run]
    return "\n".join(lines)


@settings(max_examples=EXAMPLES_RUN, deadline=None,
          derandomize=EXAMPLES_KNOB not in os.environ, database=None,
          phases=[Phase.generate],  # no shrinking: Spark is slow
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@pytest.mark.kafka
@given(stream=batches(STREAMS_PER_EXAMPLE))
def test_gold_is_a_pure_function_of_the_log(spark, kafka_broker, stream):
    note(describe(stream))
    batch_size, reset_flows = stream.max_offsets_per_trigger, sorted(stream.reset_flows)
    root = Path(tempfile.mkdtemp(prefix="exactly-once-property-"))
    try:
        def delete_checkpoints(warehouse: Path) -> dict:
            for flow in reset_flows:
                shutil.rmtree(warehouse / "_pipeline" / "checkpoints" / flow)
            return {}

        # One update per run (at least two: (a) is the one-update case): every table, silver and
        # quarantine included, against the model. (c) and (d) fork from it before the last one.
        runs = run_updates(spark, at_least_two(stream.runs), root / "updates", forks={
            "refresh": lambda _: {"full_refresh": True}, "checkpoint": delete_checkpoints})
        assert_matches_model(read_tables(spark, runs[""]), stream)
        expected = canonical(spark, runs[""])

        variants = {
            "(a) all at once": canonical(spark, run_updates(
                spark, [stream.deliveries], root / "once")[""]),
            f"(b) broker, micro-batches of {batch_size}": canonical(spark, run_through_broker(
                spark, stream.runs, root / "broker", kafka_broker.bootstrap, batch_size)),
            "(c) full refresh before the last update": canonical(spark, runs["refresh"]),
            f"(d) checkpoints of {', '.join(reset_flows)} deleted": canonical(
                spark, runs["checkpoint"]),
            "(e) the log 120 days older": canonical(spark, run_updates(
                spark, [[d for run in shifted(stream.runs, -SHIFT) for d in run]],
                root / "shifted")[""], shift=SHIFT),
        }
        for variant, tables in variants.items():
            for name in GOLD:
                assert tables[name] == expected[name], f"{variant}: {name}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- The model against itself: cheap, so many examples --------------------------------------


@settings(max_examples=300, deadline=None)
@given(stream=streams())
def test_the_models_history_agrees_with_its_current_state(stream):
    delivered = stream.deliveries
    current = {v.order_id: v.event for v in order_history(delivered, ORDERS) if v.end is None}
    assert current == current_orders(delivered, ORDERS)
