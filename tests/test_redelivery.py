"""Exactly-once effects under redelivery: late duplicates, late new events, full replays.

Three updates over a directory of kcat files whose event times are set relative to now, so
the watermark (10 minutes) and max_event_age (30 days) are really crossed.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone

import pytest
from events import Clock, grant, order

from exactly_once.kafka.kcat import KafkaRecord, write_kcat_jsonl
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.settings.pipeline import load_settings

CLOCK = Clock(datetime.now(timezone.utc))  # now


def kafka_records(records: list[tuple[str, str, dict]], first_offset: int) -> list[KafkaRecord]:
    """As a broker stores them now (LogAppendTime): lateness is measured against this."""
    now_ms = int(CLOCK.start.timestamp() * 1000)
    return [KafkaRecord(topic, key, json.dumps(p), partition=0, offset=first_offset + i,
                        timestamp_ms=now_ms) for i, (topic, key, p) in enumerate(records)]


GRANT = grant("g1", "p1", 10, occurred_at=CLOCK.at(days=-1))  # applied in run 1
TOO_OLD = grant("g-old", "p1", 1000, occurred_at=CLOCK.at(days=-40))  # past max_event_age
ORDER_V2 = order("o1-2", "o1", 2, status="paid", occurred_at=CLOCK.at(days=-1))
RUN_1 = [("player-rewards", "p1", GRANT), ("player-rewards", "p1", TOO_OLD),
         ("orders", "o1", ORDER_V2)]
RUN_2 = [
    ("player-rewards", "p1", grant("g2", "p1", 5, occurred_at=CLOCK.at())),
    ("orders", "o1", order("o1-3", "o1", 3, status="shipped", occurred_at=CLOCK.at())),
    # the watermark is now ~10 minutes ago; everything below is older than that
    ("player-rewards", "p1", GRANT),  # a duplicate, a day late: discarded
    ("player-rewards", "p1",
     grant("g-late", "p1", 7, occurred_at=CLOCK.at(days=-2))),  # new: applied
    ("orders", "o1",
     order("o1-1", "o1", 1, status="created", occurred_at=CLOCK.at(days=-2))),  # stale
    ("orders", "o9",
     order("o9-1", "o9", 1, status="created", occurred_at=CLOCK.at(days=-2))),  # new
    ("player-rewards", "p1", TOO_OLD),  # redelivered and still too old: kept aside again
]


@pytest.fixture(scope="module")
def updates(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("redelivery")
    inbox, warehouse = root / "inbox", root / "warehouse"
    inbox.mkdir()
    settings = load_settings("local", overrides={"exactly_once.source": f"file:{inbox}/*.jsonl"})

    def update():
        run_pipeline(spark, settings, warehouse)
        return {name: read_latest(spark, str(warehouse / name)).collect()
                for name in ("silver_player_rewards", "player_xp_ledger", "player_xp",
                             "late_events", "orders", "bronze_kafka_events")}

    write_kcat_jsonl(inbox / "1.jsonl", kafka_records(RUN_1, 0))
    first = update()
    write_kcat_jsonl(inbox / "2.jsonl", kafka_records(RUN_2, len(RUN_1)))
    second = update()
    # A consumer that restarts from the earliest offset: bronze forgets where it was.
    shutil.rmtree(warehouse / "_pipeline" / "checkpoints" / "bronze_kafka_events")
    replayed = update()
    return first, second, replayed


def xp(tables) -> dict:
    return {r["player_id"]: r["total_xp"] for r in tables["player_xp"]}


def test_the_first_update_applies_in_time_events_and_keeps_too_old_ones_aside(updates):
    first, _, _ = updates
    assert xp(first) == {"p1": 10}
    (late,) = first["late_events"]
    assert late["event_id"] == "g-old" and "max_event_age" in late["reason"]
    assert [(r["order_id"], r["sequence"]) for r in first["orders"]] == [("o1", 2)]


def test_a_duplicate_days_late_is_discarded_and_a_new_late_event_is_applied(updates):
    _, second, _ = updates
    assert xp(second) == {"p1": 10 + 5 + 7}  # g1 once, g2, and the late but new g-late
    assert sorted(r["event_id"] for r in second["player_xp_ledger"]) == ["g-late", "g1", "g2"]
    # Silver keeps g-late, however old its event time: its watermark follows ingestion, so a new
    # event is never behind it. g-old is in silver too, marked: max_event_age is a policy of the
    # additive effect, not of silver.
    assert sorted((r["event_id"], r["arrived_late"]) for r in second["silver_player_rewards"]) \
        == [("g-late", False), ("g-old", True), ("g1", False), ("g2", False)]
    assert sorted((r["order_id"], r["sequence"], r["status"]) for r in second["orders"]) == [
        ("o1", 3, "shipped"), ("o9", 1, "created")]
    assert [r["event_id"] for r in second["late_events"]] == ["g-old"]  # one row per event


def test_replaying_everything_from_the_earliest_offset_changes_no_gold_row(updates):
    _, second, replayed = updates
    assert len(replayed["bronze_kafka_events"]) == 2 * len(second["bronze_kafka_events"])
    for table in ("orders", "player_xp", "player_xp_ledger", "late_events"):
        assert sorted(map(tuple, replayed[table])) == sorted(map(tuple, second[table])), table
    assert xp(replayed) == {"p1": 22}
