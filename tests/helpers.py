"""Small builders shared by tests: Kafka-shaped rows and order/reward payloads; headless
Chromium for the dashboard's pages."""

from __future__ import annotations

import json
import shutil
import subprocess
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.local.storage import delta_log
from exactly_once.settings.pipeline import TopicSettings
from exactly_once.transforms.bronze import with_ingestion_time
from exactly_once.transforms.silver import rule_verdicts, well_formed_events

KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT, "
                "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")


def order(event_id: str, order_id: str, sequence, event_type: str = "order_updated",
          status: str = "paid", amount="10.00", occurred_at: str = "2026-11-21T10:00:00Z",
          **extra) -> dict:
    payload = {"event_id": event_id, "event_type": event_type, "order_id": order_id,
               "sequence": sequence, "occurred_at": occurred_at, "customer_id": "c1",
               "status": status, "amount": amount, "currency": "EUR"}
    payload.update(extra)
    return payload


def reward(event_id: str, player_id: str, xp, occurred_at: str = "2026-11-21T10:00:00Z") -> dict:
    return {"event_id": event_id, "event_type": "xp_granted", "player_id": player_id, "xp": xp,
            "reason": "quest", "occurred_at": occurred_at}


KAFKA_NOW = datetime(2026, 11, 21, tzinfo=timezone.utc)  # kafka_rows' default broker timestamp


def kafka_rows(spark: SparkSession, records: list[tuple[str, str | None, object]],
               first_offset: int = 0, timestamp: datetime = KAFKA_NOW) -> DataFrame:
    """(topic, key, payload) triples as bronze stores them: as Kafka delivered them, ingested now.

    A dict payload is sent as JSON; a str payload is sent as is (for malformed values), a bytes
    payload byte for byte (for values that are not UTF-8), None as a NULL value. `timestamp` is
    the records' Kafka (broker) timestamp.
    """
    rows = []
    for i, (topic, key, payload) in enumerate(records):
        value = payload if isinstance(payload, (bytes, type(None))) else \
            (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        rows.append((None if key is None else key.encode(), value, topic, 0,
                     first_offset + i, timestamp, 0, []))
    return with_ingestion_time(spark.createDataFrame(rows, KAFKA_SCHEMA))


def checked_events(parsed: DataFrame, topic: TopicSettings) -> DataFrame:
    """What the pipeline's `checked_<topic>` view passes on to silver, without the runtime: the
    well-formed events that `@dp.expect_all_or_drop(rule_verdicts(topic))` keeps (a constraint
    that is false or NULL drops the row)."""
    checked = well_formed_events(parsed, topic)
    for constraint in rule_verdicts(topic).values():
        checked = checked.where(F.coalesce(F.expr(constraint), F.lit(False)))
    return checked


@contextmanager
def crash_after_target_commit(monkeypatch):
    """The AUTO CDC batch inside dies right after its target commit (a MERGE, or the append
    into an empty target), before its state commit."""
    import pytest

    from exactly_once.local.auto_cdc import commits

    real_merge, real_append = commits.merge_once, commits.append_once

    def then_crash(write_once):
        def write_then_crash(*args):  # both writes end (..., role, write)
            write_once(*args)
            if args[-2] == "target":
                raise RuntimeError("killed after the target commit")
        return write_then_crash

    monkeypatch.setattr(commits, "merge_once", then_crash(real_merge))
    monkeypatch.setattr(commits, "append_once", then_crash(real_append))
    try:
        with pytest.raises(RuntimeError, match="killed"):
            yield
    finally:
        monkeypatch.setattr(commits, "merge_once", real_merge)
        monkeypatch.setattr(commits, "append_once", real_append)


def last_operation(path) -> str:
    """The operation of the Delta table's latest commit (WRITE, MERGE, OPTIMIZE...)."""
    return delta_log.commit_info(path, delta_log.latest_version(path))["operation"]


@contextmanager
def calls_into_the_jvm(spark: SparkSession):
    """The py4j commands the block sends to the session's JVM, in a list filled as it runs."""
    client = spark.sparkContext._gateway._gateway_client
    calls: list[str] = []
    send = client.send_command

    def counted(command, *args, **kwargs):
        calls.append(command)
        return send(command, *args, **kwargs)

    client.send_command = counted
    try:
        yield calls
    finally:
        client.send_command = send


def _events_delivered(spark: SparkSession):
    """The session's JVM SparkContext once its listener bus has delivered every event so far:
    Spark's status stores learn of jobs and executions asynchronously, and under load they
    lagged behind the command that had just run (a plan list found empty)."""
    context = spark._jsparkSession.sparkContext()
    context.listenerBus().waitUntilEmpty()
    return context


def _stages(spark: SparkSession) -> list:
    """Spark's records of the application's stages (its status store), all events delivered."""
    no_quantiles = spark.sparkContext._gateway.new_array(spark._jvm.double, 0)
    stages = _events_delivered(spark).statusStore().stageList(None, False, False,
                                                               no_quantiles, None)
    return [stages.apply(i) for i in range(stages.size())]


def shuffled_rows_in_stages_after(spark: SparkSession, stage_id: int) -> int:
    """The rows the stages after `stage_id` wrote to shuffles."""
    return sum(int(s.shuffleWriteRecords()) for s in _stages(spark) if s.stageId() > stage_id)


def last_stage_id(spark: SparkSession) -> int:
    return max((int(s.stageId()) for s in _stages(spark)), default=-1)


class ShuffledRowsByStep:
    """A `BatchWrite.step` recorder: the rows each named step of a batch wrote to shuffles."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark, self.rows = spark, {}

    @contextmanager
    def step(self, name: str):
        first = last_stage_id(self.spark)
        yield
        self.rows[name] = self.rows.get(name, 0) + shuffled_rows_in_stages_after(self.spark, first)


def _status_store(spark):
    """Spark's SQL status store, all events delivered (`_events_delivered`)."""
    _events_delivered(spark)
    return spark._jsparkSession.sharedState().statusStore()


def sql_plans_since(spark, execution_id: int) -> list[str]:
    """The physical plans of the session's SQL executions after `execution_id` (the newest
    100), from Spark's own status store."""
    store = _status_store(spark)
    count = store.executionsCount()
    recent = store.executionsList(max(0, count - 100), 100)
    plans = []
    for i in range(recent.size()):
        execution = recent.apply(i)
        if execution.executionId() > execution_id:
            plans.append(execution.physicalPlanDescription())
    return plans


def last_execution_id(spark) -> int:
    store = _status_store(spark)
    count = store.executionsCount()
    return store.executionsList(count - 1, 1).apply(0).executionId() if count else -1


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium(*args: str, profile: Path) -> str:
    """Headless Chromium run once with `args` (e.g. `--dump-dom URL`): what it printed."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium` (make test does)")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def scan_of(df) -> str:
    """What the read's scan lists: plain paths (Spark's InMemoryFileIndex), Delta's log (its
    own file indexes, PreparedDeltaFileIndex once planned), or nothing (a local relation)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    if "InMemoryFileIndex" in plan:
        return "paths"
    return "delta" if "DeltaFileIndex" in plan or "TahoeLogFileIndex" in plan else "none"


def runs_python_worker(df) -> bool:
    """Whether computing `df` goes through PySpark's Python worker (a `PythonRDD` in its
    lineage, as a DataFrame of a Python list has): a process each new JVM starts for it."""
    return "PythonRDD" in df._jdf.queryExecution().toRdd().toDebugString()
