"""Parsing, validation and redelivery dedup of silver, on small DataFrames and real streams.

Each test composes the functions the pipeline files call, as they call them: `parse_events`
(parsed_*.py), `well_formed_events` under `rule_verdicts` expectations (silver_*.py's
`checked_<topic>` view; `silver_frames.checked_events` applies them as `expect_all_or_drop`
does), `silver_events` (silver_*.py) and `quarantined_records` (quarantine.py).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone

import pytest
from events import grant, order
from silver_frames import checked_events, kafka_rows

from exactly_once.errors import SettingsError
from exactly_once.local.inspect.delivery import utc
from exactly_once.transforms.bronze import read_kcat_file, with_ingestion_time
from exactly_once.transforms.silver import (
    ARRIVED_LATE,
    LINEAGE,
    RESCUED_FIELDS,
    event_schema,
    parse_events,
    quarantined_records,
    rule_verdicts,
    silver_columns,
    silver_events,
    well_formed_events,
)

# The events happen at 2026-11-21T10:00:00Z (events.OCCURRED_AT; the watermark test's up to
# 10:05); Kafka stamps them at 10:10, so none is dated after its record.
KAFKA_TIME = datetime(2026, 11, 21, 10, 10, tzinfo=timezone.utc)


def delivered(spark, records):
    return kafka_rows(spark, records, timestamp=KAFKA_TIME)


def errors_by_event(spark, settings, topic_name, records):
    topic = settings.topic(topic_name)
    parsed = parse_events(delivered(spark, records), topic)
    return {r["kafka_offset"]: r["errors"] for r in parsed.collect()}


def _write_batch(directory, name, records):
    ts = int(KAFKA_TIME.timestamp() * 1000)
    lines = [json.dumps({"topic": t, "partition": 0, "offset": o, "ts": ts, "headers": [],
                         "key": k, "payload": json.dumps(p)}) for o, (t, k, p) in records]
    (directory / name).write_text("\n".join(lines) + "\n")


def stream_silver(spark, topic, root):
    """Silver as the pipeline builds it (parsed_*, checked_*, silver_*), streamed from the kcat
    files in `root/in` by one availableNow trigger into the Delta table `root/out`; the table.

    silver_events drops duplicates within the watermark, which only a stream can do.
    """
    bronze = with_ingestion_time(read_kcat_file(spark, f"{root / 'in'}/*.json"))
    events = silver_events(checked_events(parse_events(bronze, topic), topic), topic)
    events.writeStream.format("delta").option("checkpointLocation", str(root / "checkpoint")) \
        .trigger(availableNow=True).start(str(root / "out")).awaitTermination()
    return spark.read.format("delta").load(str(root / "out"))


def test_a_valid_order_reaches_silver_with_the_contract_types(spark, settings, tmp_path):
    orders = settings.topic("orders")
    record = ("orders", "o1", order("e1", "o1", 3, amount="129.90"))
    parsed = parse_events(delivered(spark, [record]), orders)
    assert quarantined_records(parsed, orders).count() == 0
    (tmp_path / "in").mkdir()
    _write_batch(tmp_path / "in", "1.json", [(0, record)])
    silver = stream_silver(spark, orders, tmp_path)
    assert silver.columns == silver_columns(orders) == [
        *(f.name for f in event_schema(orders)), RESCUED_FIELDS, *LINEAGE]  # no max_event_age
    assert silver.first()[RESCUED_FIELDS] is None  # every field is the contract's
    (row,) = silver.collect()
    assert row["sequence"] == 3 and str(row["amount"]) == "129.90"
    assert utc(row["occurred_at"]).isoformat().startswith("2026-11-21T10:00")
    assert row["kafka_offset"] == 0


def test_a_rule_breaker_is_well_formed_and_dropped_by_its_expectation(spark, settings):
    """Malformed records never reach the expectations; a well-formed event that breaks a rule
    does, and only the expectation named after that rule fails on it."""
    orders = settings.topic("orders")
    parsed = parse_events(delivered(spark, [
        ("orders", "o1", order("e1", "o1", 1)),
        ("orders", "o1", order("e2", "o1", 2, amount="-3.00")),  # breaks non_negative_amount
        ("orders", "o1", "{not json"),
    ]), orders)
    well_formed = {r["kafka_offset"]: r for r in well_formed_events(parsed, orders).collect()}
    assert sorted(well_formed) == [0, 1]
    verdicts = rule_verdicts(orders)
    assert set(verdicts) == set(orders.rules)
    failing = {name for name, sql in verdicts.items()
               if not well_formed_events(parsed, orders).where("kafka_offset = 1")
               .selectExpr(sql).first()[0]}
    assert failing == {"non_negative_amount"}
    assert [r["kafka_offset"] for r in checked_events(parsed, orders).collect()] == [0]
    assert sorted(r["kafka_offset"] for r in quarantined_records(parsed, orders).collect()) == \
        [1, 2]


def test_silver_marks_grants_the_broker_received_after_max_event_age(spark, settings,
                                                                     tmp_path):
    rewards = settings.topic("player_rewards")  # max_event_age: 30 days
    (tmp_path / "in").mkdir()
    _write_batch(tmp_path / "in", "1.json", [
        (0, ("player-rewards", "p1", grant("x1", "p1", 5))),
        (1, ("player-rewards", "p1", grant("x2", "p1", 5, occurred_at="2026-10-01T10:00:00Z"))),
    ])
    silver = stream_silver(spark, rewards, tmp_path)
    assert silver.columns == silver_columns(rewards) and silver.columns[-1] == ARRIVED_LATE
    assert {r["event_id"]: r[ARRIVED_LATE] for r in silver.collect()} == {"x1": False,
                                                                        "x2": True}


def test_a_schema_without_fields_is_a_settings_error(spark, settings):
    broken = dataclasses.replace(settings.topic("orders"), schema="STRING")
    with pytest.raises(SettingsError, match="exactly_once.topics.orders.schema must list fields"):
        event_schema(broken)


BAD_ORDERS = [
    ("{not json", "o1", ["malformed_json"]),
    ("[1, 2]", "o1", ["malformed_json"]),
    (order(None, "o1", 1), "o1", ["has_event_id"]),
    (order("e1", "o1", None), "o1", ["has_sequence"]),
    (order("e1", "o1", "7"), "o1", ["invalid_sequence", "has_sequence"]),  # quoted int
    (order("e1", "o1", 1.5), "o1", ["invalid_sequence", "has_sequence"]),
    (order("e1", "o1", 1, event_type="order_teleported"), "o1", ["known_event_type"]),
    (order("e1", "o1", 1, occurred_at="yesterday"), "o1",
     ["invalid_occurred_at", "has_occurred_at"]),
    (order("e1", "o1", 1), None, ["has_key", "key_matches_order_id"]),
    (order("e1", "o2", 1), "o1", ["key_matches_order_id"]),
    (order("e1", "o1", 1, amount="lots"), "o1", ["invalid_amount", "full_state_on_upsert"]),
    (order("e1", "o1", 1, amount="-3.00"), "o1", ["non_negative_amount"]),
    (order("e1", "o1", 1, status=None), "o1", ["full_state_on_upsert"]),
]


def test_each_bad_order_names_every_check_it_fails(spark, settings):
    records = [("orders", key, payload) for payload, key, _ in BAD_ORDERS]
    expected = {offset: errors for offset, (_, _, errors) in enumerate(BAD_ORDERS)}
    assert errors_by_event(spark, settings, "orders", records) == expected


def test_a_delete_needs_no_state_but_an_upsert_does(spark, settings):
    delete = {"event_id": "e9", "event_type": "order_deleted", "order_id": "o1", "sequence": 9,
              "occurred_at": "2026-11-21T10:00:00Z"}
    upsert = dict(delete, event_type="order_updated")
    errors = errors_by_event(spark, settings, "orders",
                             [("orders", "o1", delete), ("orders", "o1", upsert)])
    assert errors == {0: [], 1: ["full_state_on_upsert"]}


def test_xp_must_be_a_positive_integer(spark, settings):
    cases = [(5, []), (0, ["positive_xp"]), (-5, ["positive_xp"]),
             ("5", ["invalid_xp", "positive_xp"])]
    records = [("player-rewards", "p1", grant(f"x{i}", "p1", xp)) for i, (xp, _) in
               enumerate(cases)]
    assert errors_by_event(spark, settings, "player_rewards", records) == {
        i: errors for i, (_, errors) in enumerate(cases)}


def test_quarantine_keeps_the_raw_record_and_reason(spark, settings):
    orders = settings.topic("orders")
    parsed = parse_events(delivered(spark, [("orders", "o1", "{oops"),
                                            ("player-rewards", "p1", "{oops")]), orders)
    (row,) = quarantined_records(parsed, orders).collect()  # only this topic's record
    assert (row["source_topic"], row["kafka_topic"], row["kafka_key"], row["value"]) == (
        "orders", "orders", "o1", "{oops")
    assert row["reason"] == "malformed_json" and row["kafka_offset"] == 0


def test_watermark_dedup_drops_redeliveries_across_micro_batches(spark, settings, tmp_path):
    """A real stream: each availableNow trigger is one micro-batch over the files so far."""
    orders = settings.topic("orders")  # watermark delay: 10 minutes
    inbox = tmp_path / "in"
    inbox.mkdir()
    first = order("e1", "o1", 1, occurred_at="2026-11-21T10:00:00Z")
    _write_batch(inbox, "1.json", [(0, ("orders", "o1", first)), (1, ("orders", "o1", first))])

    def run_trigger():
        return sorted((r["event_id"], r["kafka_offset"])
                      for r in stream_silver(spark, orders, tmp_path).collect())

    assert run_trigger() == [("e1", 0)]  # duplicate inside one batch: first delivery kept
    later = order("e2", "o1", 2, occurred_at="2026-11-21T10:05:00Z")
    _write_batch(inbox, "2.json", [(2, ("orders", "o1", first)), (3, ("orders", "o1", later))])
    assert run_trigger() == [("e1", 0), ("e2", 3)]  # redelivery in a later batch dropped
