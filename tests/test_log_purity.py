"""Gold is a pure function of the Kafka log: one test per way a pipeline's later life broke it.

Each test runs the real pipeline files on kcat files whose Kafka timestamps are set like a
broker's (`LogAppendTime`: seconds after each event), and checks the gold tables after what a
pipeline goes through after its first week: a rebuild of old data, a reset checkpoint, a full
refresh after retention, an expired tombstone, equal sequences, a second concurrent run. The
scenarios share one warehouse and five updates (the `log` fixture), each on keys of its own;
the lock's gets a warehouse of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from events import grant, iso, order
from pyspark.sql import functions as F

from exactly_once import cli
from exactly_once.kafka.kcat import KafkaRecord, write_kcat_jsonl
from exactly_once.local.auto_cdc.scd1 import DELETED_AT
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe.progress import UpdateResult
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.settings.pipeline import load_settings

NOW = datetime.now(timezone.utc).replace(microsecond=0)
DAY = timedelta(days=1)


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
        return read_latest(spark, str(self.warehouse / name)).collect()


@pytest.fixture
def topic(tmp_path) -> Topic:
    return Topic(tmp_path)


def current_orders(spark, topic: Topic) -> dict[str, tuple]:
    return {r["order_id"]: (r["sequence"], r["status"]) for r in topic.table(spark, "orders")}


GOLD = ("orders", "orders_history", "late_events", "player_xp", "player_xp_ledger",
        "bronze_kafka_events")


@dataclass
class Log:
    """One topic and warehouse that the scenarios below share: each has keys and event_ids of
    its own (its prefix), so no scenario's records touch another's rows, and each asserts on
    its own keys, in the tables as they were after the update its scenario needs."""
    topic: Topic
    after: list[dict[str, list]]  # the tables after update 1, 2, ... (index 0: update 1)
    results: list[UpdateResult]

    def rows(self, update: int, name: str, prefix: str = "") -> list:
        key = {"late_events": "event_id", "player_xp": "player_id",
               "player_xp_ledger": "player_id", "bronze_kafka_events": "key"}.get(name, "order_id")
        return [r for r in self.after[update - 1][name]
                if (r[key] if key != "key" else bytes(r[key]).decode()).startswith(prefix)]

    def current_orders(self, update: int, prefix: str = "") -> dict[str, tuple]:
        return {r["order_id"]: (r["sequence"], r["status"])
                for r in self.rows(update, "orders", prefix)}

    def open_versions(self, update: int, prefix: str) -> dict[str, tuple]:
        return {r["order_id"]: (r["sequence"], r["status"])
                for r in self.rows(update, "orders_history", prefix) if r["__END_AT"] is None}


@pytest.fixture(scope="module")
def log(spark, tmp_path_factory) -> Log:
    """Five updates instead of one warehouse and one to three updates per scenario: an update's
    fixed cost is many seconds, a scenario's few records cost almost nothing. What a scenario
    does to the whole warehouse between updates (deleting a checkpoint, ageing tombstones,
    emptying a table, a full refresh) is what the property says leaves gold as it was, so it
    changes nothing for the other scenarios' keys either; operations whose counts a scenario
    asserts (the reset checkpoint's rows written, the selected refresh's flows) get an update in
    which no other scenario adds records to that flow."""
    topic = Topic(tmp_path_factory.mktemp("log-purity"))
    after: list[dict[str, list]] = []
    results: list[UpdateResult] = []

    def update(**options) -> None:
        results.append(topic.run(spark, **options))
        after.append({name: topic.table(spark, name) for name in GOLD})

    # Update 1: every scenario's first records, each scenario its own kcat file.
    old = NOW - 90 * DAY  # rb-: a rebuild of 90-day-old grants
    topic.publish([("player-rewards", f"rb-p{i % 3}", grant(
        f"rb-g{i}", f"rb-p{i % 3}", 10 + i, occurred_at=iso(old + i * timedelta(minutes=1))))
        for i in range(6)])
    topic.publish([("player-rewards", "late-p1", grant("late-g-old", "late-p1", 5,
                                                       occurred_at=iso(NOW - 90 * DAY)))],
                  delay=40 * DAY)  # late-: the producer sent it 40 days after it happened
    topic.publish([("orders", "rc-o1", order("rc-o1-1", "rc-o1", 1, occurred_at=iso(NOW)))])
    retained = topic.publish([("player-rewards", "fr-p1", grant(
        "fr-g1", "fr-p1", 10, occurred_at=iso(NOW - 9 * DAY)))])
    topic.publish([("orders", "sel-o1", order("sel-o1-1", "sel-o1", 1, occurred_at=iso(NOW)))])
    ts_created = order("ts-o1-1", "ts-o1", 1, status="created", occurred_at=iso(NOW))
    topic.publish([("orders", "ts-o1", ts_created),
                   ("orders", "ts-o1", order("ts-o1-2", "ts-o1", 2, event_type="order_deleted",
                                             occurred_at=iso(NOW), state=True))])
    for delete_first in (True, False):  # tieT- / tieF-: equal sequences in one batch
        key = f"tie{'TF'[not delete_first]}-o1"
        upsert = order(f"{key}-2", key, 2, status="shipped", occurred_at=iso(NOW))
        delete = order(f"{key}-2", key, 2, event_type="order_deleted", occurred_at=iso(NOW),
                       state=True)
        tie = [("orders", key, delete), ("orders", key, upsert)]
        topic.publish([("orders", key, order(f"{key}-1", key, 1, occurred_at=iso(NOW))),
                       *(tie if delete_first else tie[::-1])])
    topic.publish([("orders", "ta-o1", order("ta-o1-2", "ta-o1", 2, status="shipped",
                                             occurred_at=iso(NOW)))])  # ta-: a tie across updates
    update()

    # Update 2: rc- resets the orders flow's checkpoint and adds one order (the only new order
    # of this update: the flow's rows written count it alone); ts-: a year passes, so its
    # tombstone was written a year ago, and this update's orders batch runs tombstone GC.
    shutil.rmtree(topic.warehouse / "_pipeline" / "checkpoints" / "orders")
    state = DeltaTable.forPath(spark, str(topic.warehouse / "_pipeline" / "auto_cdc" / "orders"))
    state.update(F.col(DELETED_AT).isNotNull(),
                 {DELETED_AT: F.col(DELETED_AT) - F.expr("INTERVAL 365 DAYS")})
    topic.publish([("orders", "rc-o2", order("rc-o2-1", "rc-o2", 1, occurred_at=iso(NOW)))])
    update()

    # Update 3: ts-: the older copy, redelivered a year late (and a new order); ta-: the delete
    # with the sequence of the upsert of update 1.
    topic.publish([("orders", "ts-o9", order("ts-o9-1", "ts-o9", 1, occurred_at=iso(NOW)))])
    topic.publish([("orders", "ts-o1", ts_created)])
    topic.publish([("orders", "ta-o1", order("ta-o1-2", "ta-o1", 2, event_type="order_deleted",
                                             occurred_at=iso(NOW), state=True))])
    update()

    # Update 4: sel-: one table damaged, then a full refresh of it alone.
    DeltaTable.forPath(spark, str(topic.warehouse / "orders")).delete()
    update(full_refresh=["orders"])

    # Update 5: fr-: retention deleted the first grant from Kafka, then a full refresh.
    retained.unlink()
    topic.publish([("player-rewards", "fr-p1", grant("fr-g2", "fr-p1", 5,
                                                     occurred_at=iso(NOW)))])
    update(full_refresh=True)
    return Log(topic, after, results)


# 1. Lateness is measured by the log, not by the day the pipeline runs ---------------------------
def test_a_rebuild_of_90_day_old_grants_applies_every_one(log):
    assert log.rows(1, "late_events", "rb-") == []
    totals = {r["player_id"]: r["total_xp"] for r in log.rows(1, "player_xp", "rb-")}
    assert totals == {"rb-p0": 10 + 13, "rb-p1": 11 + 14, "rb-p2": 12 + 15}


def test_a_grant_the_broker_received_after_max_event_age_is_kept_aside(log):
    # The only late grant of update 1: late_events holds it and nothing else.
    assert [r["event_id"] for r in log.rows(1, "late_events")] == ["late-g-old"]
    assert log.rows(1, "player_xp", "late-") == []


# 2. A reset AUTO CDC checkpoint does not make Delta skip new data --------------------------------
def test_a_reset_auto_cdc_checkpoint_still_applies_new_orders(log):
    assert log.current_orders(2, "rc-") == {"rc-o1": (1, "paid"), "rc-o2": (1, "paid")}
    (flow,) = [f for f in log.results[1].flows if f.flow == "orders"]
    assert flow.output_rows == 1  # rc-o2; the rest was re-read from the start and is stale


# 3. Full refresh keeps what Kafka no longer has ---------------------------------------------------
def test_a_full_refresh_keeps_the_ledger_and_bronze_after_retention(log):
    assert sorted(r["event_id"] for r in log.rows(5, "player_xp_ledger", "fr-")) == [
        "fr-g1", "fr-g2"]
    assert [(r["player_id"], r["total_xp"]) for r in log.rows(5, "player_xp", "fr-")] == [
        ("fr-p1", 15)]
    assert len(log.rows(5, "bronze_kafka_events", "fr-")) == 2
    # Bronze kept every record of every scenario: Kafka's files are not read again.
    assert len(log.rows(5, "bronze_kafka_events")) == sum(log.topic.offsets.values()) + len(
        log.topic.offsets)


def test_full_refresh_of_selected_tables(spark, log):
    from exactly_once.local.execution.refresh import RefreshError

    # The emptied table holds every order again, as before the damage; nothing else ran.
    assert log.current_orders(4, "sel-") == {"sel-o1": (1, "paid")}
    assert log.current_orders(4) == log.current_orders(3)
    assert {f.flow for f in log.results[3].flows} == {"orders"}
    with pytest.raises(RefreshError, match="player_xp_ledger.*pipelines.reset.allowed"):
        log.topic.run(spark, full_refresh=["player_xp_ledger"])
    with pytest.raises(RefreshError, match="no_such_table"):
        log.topic.run(spark, refresh=["no_such_table"])


def test_the_cli_names_an_unknown_or_protected_table_in_one_line(in_session, tmp_path, capsys):
    """`exactly-once run` in this process's Spark session (as tests/test_timeline.py runs it):
    the error is the command's, not the process's (tests/test_cli_errors.py covers those)."""
    inbox = tmp_path / "in.jsonl"
    inbox.write_text("")
    for table, message in [("nope", "unknown table `nope`"),
                           ("bronze_kafka_events", "`bronze_kafka_events` is protected")]:
        code = cli.main(["run", "--source", f"file:{inbox}", "--warehouse",
                         str(tmp_path / "wh"), "--full-refresh", table])
        stderr = capsys.readouterr().err
        assert code == 1, stderr
        assert "Traceback" not in stderr
        (last,) = stderr.strip().splitlines()  # in-process: no JVM start-up notes above it
        assert last.startswith("exactly-once: error: ") and message in last, stderr


# 4. A deleted order stays deleted, in both gold tables, however late an older copy arrives ------
def test_an_old_tombstone_still_blocks_an_older_redelivery(log):
    assert log.current_orders(3, "ts-") == {"ts-o9": (1, "paid")}
    assert log.open_versions(3, "ts-") == log.current_orders(3, "ts-")


# 5. Equal sequences are decided by the events, not by their order in a batch ----------------------
@pytest.mark.parametrize("delete_first", [True, False])
def test_an_upsert_and_a_delete_with_equal_sequences_decide_the_same_way(log, delete_first):
    key = f"tie{'TF'[not delete_first]}-"
    assert log.current_orders(1, key) == {}  # the delete wins a tie, in SCD1 and SCD2 alike
    assert log.open_versions(1, key) == {}


def test_a_tie_decides_the_same_way_across_updates(log):
    assert log.current_orders(1, "ta-") == {"ta-o1": (2, "shipped")}
    assert log.current_orders(3, "ta-") == {}
    assert log.open_versions(3, "ta-") == {}


# 6. One update at a time per warehouse ------------------------------------------------------------
HOLD_LOCK = """
import sys
from pathlib import Path
from exactly_once.local.storage.lock import WarehouseLock
with WarehouseLock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.read()  # hold it until the test closes stdin or kills us
"""


def test_a_second_run_on_a_locked_warehouse_names_the_holder(spark, topic):
    from exactly_once.local.storage.lock import WarehouseLockedError

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
