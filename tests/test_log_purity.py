"""Gold is a pure function of the Kafka log: one test per way a pipeline's later life broke it.

Each test runs the real pipeline files on kcat files whose Kafka timestamps are set like a
broker's (`LogAppendTime`: seconds after each event), and checks the gold tables after what a
pipeline goes through after its first week: a rebuild of old data, a reset checkpoint, a full
refresh after retention, an expired tombstone, equal sequences, a second concurrent run.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from helpers import order, reward
from pyspark.sql import functions as F

from exactly_once.config import load_settings
from exactly_once.kafka.kcat import KafkaRecord, write_kcat_jsonl
from exactly_once.local.auto_cdc.scd1 import DELETED_AT
from exactly_once.local.pipeline import run_pipeline

NOW = datetime.now(timezone.utc).replace(microsecond=0)
DAY = timedelta(days=1)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class Topic:
    """A directory of kcat files standing in for the topics: one file per publish."""

    def __init__(self, root: Path):
        self.inbox, self.warehouse = root / "inbox", root / "warehouse"
        self.inbox.mkdir(parents=True)
        self.offsets: dict[str, int] = {}
        self.files = 0
        self.settings = load_settings(
            "local", overrides={"exactly_once.source": f"file:{self.inbox}/*.jsonl"})

    def publish(self, events: list[tuple[str, str | None, dict]],
                delay: timedelta = timedelta(seconds=5)) -> Path:
        """Appends the events; each one's Kafka timestamp is its occurred_at + `delay`."""
        records = []
        for topic, key, payload in events:
            offset = self.offsets[topic] = self.offsets.get(topic, -1) + 1
            occurred = datetime.fromisoformat(payload["occurred_at"].replace("Z", "+00:00"))
            records.append(KafkaRecord(topic, key, json.dumps(payload), partition=0,
                                       offset=offset,
                                       timestamp_ms=int((occurred + delay).timestamp() * 1000)))
        path = self.inbox / f"{self.files:04d}.jsonl"
        self.files += 1
        write_kcat_jsonl(path, records)
        return path

    def run(self, spark, **options):
        return run_pipeline(spark, self.settings, self.warehouse, **options)

    def table(self, spark, name: str) -> list:
        return spark.read.format("delta").load(str(self.warehouse / name)).collect()


@pytest.fixture
def topic(tmp_path) -> Topic:
    return Topic(tmp_path)


def current_orders(spark, topic: Topic) -> dict[str, tuple]:
    return {r["order_id"]: (r["sequence"], r["status"]) for r in topic.table(spark, "orders")}


def open_versions(spark, topic: Topic) -> dict[str, tuple]:
    return {r["order_id"]: (r["sequence"], r["status"])
            for r in topic.table(spark, "orders_history") if r["__END_AT"] is None}


# 1. Lateness is measured by the log, not by the day the pipeline runs ---------------------------
def test_a_rebuild_of_90_day_old_grants_applies_every_one(spark, topic):
    old = NOW - 90 * DAY
    grants = [reward(f"g{i}", f"p{i % 3}", 10 + i, occurred_at=iso(old + i * timedelta(minutes=1)))
              for i in range(6)]
    topic.publish([("player-rewards", g["player_id"], g) for g in grants])
    topic.run(spark)
    assert topic.table(spark, "late_events") == []
    totals = {r["player_id"]: r["total_xp"] for r in topic.table(spark, "player_xp")}
    assert totals == {"p0": 10 + 13, "p1": 11 + 14, "p2": 12 + 15}


def test_a_grant_the_broker_received_after_max_event_age_is_kept_aside(spark, topic):
    topic.publish([("player-rewards", "p1", reward("g-old", "p1", 5,
                                                   occurred_at=iso(NOW - 90 * DAY)))],
                  delay=40 * DAY)  # the producer sent it 40 days after it happened
    topic.run(spark)
    assert [r["event_id"] for r in topic.table(spark, "late_events")] == ["g-old"]
    assert topic.table(spark, "player_xp") == []


# 2. A reset AUTO CDC checkpoint does not make Delta skip new data --------------------------------
def test_a_reset_auto_cdc_checkpoint_still_applies_new_orders(spark, topic):
    topic.publish([("orders", "o1", order("o1-1", "o1", 1, occurred_at=iso(NOW)))])
    topic.run(spark)
    shutil.rmtree(topic.warehouse / "_pipeline" / "checkpoints" / "orders")
    topic.publish([("orders", "o2", order("o2-1", "o2", 1, occurred_at=iso(NOW)))])
    result = topic.run(spark)
    assert current_orders(spark, topic) == {"o1": (1, "paid"), "o2": (1, "paid")}
    (flow,) = [f for f in result.flows if f.flow == "orders"]
    assert flow.output_rows == 1  # o2; o1 was re-read from the start and is stale


# 3. Full refresh keeps what Kafka no longer has ---------------------------------------------------
def test_a_full_refresh_keeps_the_ledger_and_bronze_after_retention(spark, topic):
    first = topic.publish([("player-rewards", "p1", reward("g1", "p1", 10,
                                                           occurred_at=iso(NOW - 9 * DAY)))])
    topic.run(spark)
    first.unlink()  # retention: Kafka no longer has the first grant
    topic.publish([("player-rewards", "p1", reward("g2", "p1", 5, occurred_at=iso(NOW)))])
    topic.run(spark, full_refresh=True)
    assert sorted(r["event_id"] for r in topic.table(spark, "player_xp_ledger")) == ["g1", "g2"]
    assert [(r["player_id"], r["total_xp"]) for r in topic.table(spark, "player_xp")] == [
        ("p1", 15)]
    assert len(topic.table(spark, "bronze_kafka_events")) == 2


def test_full_refresh_of_selected_tables(spark, topic):
    from exactly_once.local.refresh import RefreshError

    topic.publish([("orders", "o1", order("o1-1", "o1", 1, occurred_at=iso(NOW)))])
    topic.run(spark)
    DeltaTable.forPath(spark, str(topic.warehouse / "orders")).delete()  # damage one table
    result = topic.run(spark, full_refresh=["orders"])
    assert current_orders(spark, topic) == {"o1": (1, "paid")}
    assert {f.flow for f in result.flows} == {"orders"}  # nothing else ran
    with pytest.raises(RefreshError, match="player_xp_ledger.*pipelines.reset.allowed"):
        topic.run(spark, full_refresh=["player_xp_ledger"])
    with pytest.raises(RefreshError, match="no_such_table"):
        topic.run(spark, refresh=["no_such_table"])


def test_the_cli_names_an_unknown_or_protected_table_in_one_line(tmp_path):
    inbox = tmp_path / "in.jsonl"
    inbox.write_text("")
    for table, message in [("nope", "unknown table `nope`"),
                           ("bronze_kafka_events", "`bronze_kafka_events` is protected")]:
        done = subprocess.run(
            [sys.executable, "-m", "exactly_once.cli", "run", "--source", f"file:{inbox}",
             "--warehouse", str(tmp_path / "wh"), "--full-refresh", table],
            capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr  # above it only the JVM's own start-up notes
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("exactly-once: error: ") and message in last, done.stderr


# 4. A deleted order stays deleted, in both gold tables, however late an older copy arrives ------
def test_an_old_tombstone_still_blocks_an_older_redelivery(spark, topic):
    created = order("o1-1", "o1", 1, status="created", occurred_at=iso(NOW))
    topic.publish([("orders", "o1", created),
                   ("orders", "o1", order("o1-2", "o1", 2, event_type="order_deleted",
                                          occurred_at=iso(NOW)))])
    topic.run(spark)
    state = DeltaTable.forPath(spark, str(topic.warehouse / "_pipeline" / "auto_cdc" / "orders"))
    # A year passes: the tombstone was written a year ago.
    state.update(F.col(DELETED_AT).isNotNull(),
                 {DELETED_AT: F.col(DELETED_AT) - F.expr("INTERVAL 365 DAYS")})
    topic.publish([("orders", "o9", order("o9-1", "o9", 1, occurred_at=iso(NOW)))])
    topic.run(spark)  # any update: tombstone GC runs at the end of each batch
    topic.publish([("orders", "o1", created)])  # the older copy, redelivered a year late
    topic.run(spark)
    assert current_orders(spark, topic) == {"o9": (1, "paid")}
    assert open_versions(spark, topic) == current_orders(spark, topic)


# 5. Equal sequences are decided by the events, not by their order in a batch ----------------------
@pytest.mark.parametrize("delete_first", [True, False])
def test_an_upsert_and_a_delete_with_equal_sequences_decide_the_same_way(spark, topic,
                                                                          delete_first):
    upsert = order("o1-2", "o1", 2, status="shipped", occurred_at=iso(NOW))
    delete = order("o1-2", "o1", 2, event_type="order_deleted", occurred_at=iso(NOW))
    tie = [("orders", "o1", delete), ("orders", "o1", upsert)]
    topic.publish([("orders", "o1", order("o1-1", "o1", 1, occurred_at=iso(NOW))),
                   *(tie if delete_first else tie[::-1])])
    topic.run(spark)
    assert current_orders(spark, topic) == {}  # the delete wins a tie, in SCD1 and SCD2 alike
    assert open_versions(spark, topic) == {}


def test_a_tie_decides_the_same_way_across_updates(spark, topic):
    topic.publish([("orders", "o1", order("o1-2", "o1", 2, status="shipped",
                                          occurred_at=iso(NOW)))])
    topic.run(spark)
    topic.publish([("orders", "o1", order("o1-2", "o1", 2, event_type="order_deleted",
                                          occurred_at=iso(NOW)))])
    topic.run(spark)
    assert current_orders(spark, topic) == {}
    assert open_versions(spark, topic) == {}


# 6. One update at a time per warehouse ------------------------------------------------------------
HOLD_LOCK = """
import sys
from pathlib import Path
from exactly_once.local.lock import WarehouseLock
with WarehouseLock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.read()  # hold it until the test closes stdin or kills us
"""


def test_a_second_run_on_a_locked_warehouse_names_the_holder(spark, topic):
    from exactly_once.local.lock import WarehouseLockedError

    topic.publish([("orders", "o1", order("o1-1", "o1", 1, occurred_at=iso(NOW)))])
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(topic.warehouse)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(WarehouseLockedError,
                           match=f"pid {holder.pid} on {socket.gethostname()}"):
            topic.run(spark)
        assert not (topic.warehouse / "orders").exists()  # nothing ran
        os.kill(holder.pid, 9)  # dies holding the lock: a stale lock is taken over
        holder.wait()
        topic.run(spark)
        assert current_orders(spark, topic) == {"o1": (1, "paid")}
    finally:
        if holder.poll() is None:
            holder.kill()
