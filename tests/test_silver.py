"""Parsing, validation and redelivery dedup of silver, on small DataFrames and real streams."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from helpers import kafka_rows, order, reward

from exactly_once.transforms.bronze import read_kcat_file, with_ingestion_time
from exactly_once.transforms.silver import (
    deduplicate_events,
    parse_events,
    quarantined_records,
    valid_events,
)

# The helpers' events happen at 2026-11-21T10:00:00Z (the watermark test's up to 10:05);
# Kafka stamps them at 10:10, so none is dated after its record.
KAFKA_TIME = datetime(2026, 11, 21, 10, 10, tzinfo=timezone.utc)


def delivered(spark, records):
    return kafka_rows(spark, records, timestamp=KAFKA_TIME)


def errors_by_event(spark, settings, topic_name, records):
    topic = settings.topic(topic_name)
    parsed = parse_events(delivered(spark, records), topic)
    return {r["kafka_offset"]: r["errors"] for r in parsed.collect()}


def test_a_valid_order_is_parsed_with_the_contract_types(spark, settings):
    orders = settings.topic("orders")
    parsed = parse_events(delivered(spark, [("orders", "o1", order("e1", "o1", 3,
                                                                    amount="129.90"))]), orders)
    (row,) = valid_events(parsed, orders).collect()
    assert row["sequence"] == 3 and str(row["amount"]) == "129.90"
    assert row["occurred_at"].isoformat().startswith("2026-11-21T10:00")
    assert row["kafka_offset"] == 0
    assert quarantined_records(parsed, orders).count() == 0


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
    records = [("player-rewards", "p1", reward(f"x{i}", "p1", xp)) for i, (xp, _) in
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


def _write_batch(directory, name, records):
    ts = int(KAFKA_TIME.timestamp() * 1000)
    lines = [json.dumps({"topic": t, "partition": 0, "offset": o, "ts": ts, "headers": [],
                         "key": k, "payload": json.dumps(p)}) for o, (t, k, p) in records]
    (directory / name).write_text("\n".join(lines) + "\n")


def test_watermark_dedup_drops_redeliveries_across_micro_batches(spark, settings, tmp_path):
    """A real stream: each availableNow trigger is one micro-batch over the files so far."""
    orders = settings.topic("orders")  # watermark delay: 10 minutes
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    first = order("e1", "o1", 1, occurred_at="2026-11-21T10:00:00Z")
    _write_batch(inbox, "1.json", [(0, ("orders", "o1", first)), (1, ("orders", "o1", first))])

    def run_trigger():
        bronze = with_ingestion_time(read_kcat_file(spark, f"{inbox}/*.json"))
        events = deduplicate_events(valid_events(parse_events(bronze, orders), orders), orders)
        events.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "ckpt")) \
            .trigger(availableNow=True).start(str(out)).awaitTermination()
        return sorted((r["event_id"], r["kafka_offset"])
                      for r in spark.read.format("delta").load(str(out)).collect())

    assert run_trigger() == [("e1", 0)]  # duplicate inside one batch: first delivery kept
    later = order("e2", "o1", 2, occurred_at="2026-11-21T10:05:00Z")
    _write_batch(inbox, "2.json", [(2, ("orders", "o1", first)), (3, ("orders", "o1", later))])
    assert run_trigger() == [("e1", 0), ("e2", 3)]  # redelivery in a later batch dropped
