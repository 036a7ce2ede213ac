"""The same pipeline beyond one machine: on a Spark standalone cluster (a master and two one-core
workers, real processes), with the warehouse on a local disk or on an S3-compatible object
store (versitygw, a real store), against the real Kafka broker.

An update on the cluster is `exactly-once run --master spark://...` as a process of its own:
its driver, the cluster's executors. The tables it ends with must be those of the model
(tests/reference.py). One such update here, into the object store with a worker SIGKILLed in
its middle (each costs a minute or more of the suite's two cores); the crash sweep's cluster
trial runs one into a local warehouse.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import date

import pytest
from cluster_fixtures import start_cli
from crash_points import write_tiny_dump
from test_end_to_end import START, assert_tables_match, consume_all, generate, own_topics

from exactly_once.cli import main
from exactly_once.errors import ObjectStoreError
from exactly_once.kafka.producer import produce_records
from exactly_once.local.auto_cdc.from_snapshot import versions as snapshot_versions
from exactly_once.local.auto_cdc.from_snapshot.versions import AppliedSnapshot
from exactly_once.local.storage import files
from exactly_once.local.storage.lock import WarehouseLock
from exactly_once.paths import PROJECT_ROOT
from exactly_once.services import cluster
from exactly_once.services.processes import free_port, pid_alive, reap
from exactly_once.services.s3_server import S3Server
from exactly_once.settings.engine import ObjectStoreSettings

pytestmark = pytest.mark.kafka


def run_args(master: str, warehouse: str, bootstrap: str, topics: list[str],
             max_offsets: int) -> list[str]:
    # --bundle: some of these runs start in a folder of their own, outside the project.
    return ["run", "--quiet", "--bundle", str(PROJECT_ROOT), "--master", master,
            "--warehouse", warehouse,
            "--bootstrap-servers", bootstrap, "--set", f"topics.orders.topic={topics[0]}",
            "--set", f"topics.player_rewards.topic={topics[1]}",
            "--set", f"kafka.max_offsets_per_trigger={max_offsets}"]


def keys_tables(keys: list[str]) -> set[str]:
    """The tables of the store's keys `warehouse/<table>/...`."""
    return {k.split("/")[1] for k in keys if k.count("/") > 1}


def apps_run_on(info: cluster.ClusterInfo) -> list[dict]:
    status = cluster.master_status(info.ui)
    assert status is not None
    return [*status.get("activeapps", []), *status.get("completedapps", [])]


def test_the_warehouse_on_the_object_store_and_a_worker_killed_mid_update(
        spark, kafka_broker, spark_cluster, s3_store, tmp_path, monkeypatch):
    """The update runs on the cluster, with tables, event log, checkpoints and the lock all on
    the store, and writes nothing to the local disk but its log and scratch space under
    EXACTLY_ONCE_HOME. One worker (so its executor) is SIGKILLed once bronze has committed its
    first micro-batch: Spark runs the lost tasks on the other worker, and the update ends with
    the model's tables. (One update for all of it: each update on the cluster costs a minute or
    more of the suite's two cores. A cluster's update into a local warehouse is the crash
    sweep's cluster trial.)"""
    bootstrap = kafka_broker.bootstrap
    topics, _ = own_topics(bootstrap, "s3", max_offsets_per_trigger=150)
    produce_records(bootstrap, generate(topics, events=500, orders=40, players=12, seed=33,
                                        start=START))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    store = object_store(s3_store, monkeypatch)
    warehouse = files.location(f"s3a://{s3_store.bucket}/warehouse")
    assert isinstance(warehouse, files.ObjectPath)
    lock = warehouse / "_pipeline" / "lock"
    first_commit = warehouse / "bronze_kafka_events" / "_delta_log" / f"{1:020d}.json"
    apps_before = len(apps_run_on(spark_cluster))
    trace = tmp_path / "trace.json"  # --profile's, outside EXACTLY_ONCE_HOME and cwd
    process = start_cli([*run_args(spark_cluster.url, str(warehouse), bootstrap, topics, 150),
                         "--profile", "--profile-output", str(trace)],
                        tmp_path / "home", env=s3_store.environment(), cwd=cwd)
    lock_seen = killed = False
    try:
        while process.poll() is None:
            lock_seen = lock_seen or lock.is_file()
            if not killed and first_commit.is_file():
                cluster.kill_worker(spark_cluster, 1)
                killed = True
            time.sleep(0.1)
        stdout, stderr = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
        cluster.start(spark_cluster.home, port=spark_cluster.port)  # the worker back
    assert process.returncode == 0, stderr
    assert len(apps_run_on(spark_cluster)) == apps_before + 1, "the update ran on the cluster"
    assert killed, "a worker was killed in the middle of the update"
    # The driver's local files through Java NIO on a cluster too (engine/local_fs.py).
    forked = next(line for line in stdout.splitlines()
                  if line.startswith("Child processes the Spark JVM started"))
    assert "chmod" not in forked and "readlink" not in forked, forked
    assert lock_seen, "the update held its lock on the object store"
    assert not lock.exists(), "and released it"

    keys = {item["Key"] for page in warehouse._list(delimiter=False)
            for item in page.get("Contents", [])}
    for expected in ("orders/_delta_log/00000000000000000000.json",
                     "event_log/_delta_log/00000000000000000000.json",
                     "_pipeline/checkpoints/bronze_kafka_events/offsets/0",
                     "_pipeline/checkpoints/silver_orders/state/0/0/1.changelog",  # RocksDB
                     "_pipeline/auto_cdc/orders/_delta_log/00000000000000000000.json"):
        assert f"warehouse/{expected}" in keys, expected
    assert list(cwd.iterdir()) == [], "nothing written in the working directory"
    assert {p.name for p in (tmp_path / "home").iterdir()} <= {"logs", "scratch", "catalog"}, \
        "locally, only the JVM's log, the driver's scratch space and the local catalog's names"
    catalog = tmp_path / "home" / "catalog"
    assert {p.read_text().strip() for p in catalog.rglob("_location")} <= \
        {f"s3a://{s3_store.bucket}/warehouse/{t}" for t in keys_tables(keys)}, \
        "the catalog names the store's tables"

    copy = tmp_path / "copy"  # the store's tables, read with this session's (local) Spark
    for key in (k for k in keys if not k.endswith("/")):  # not S3A's directory markers
        target = copy / key.removeprefix("warehouse/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(files.ObjectPath(store, key).read_bytes())
    assert_tables_match(spark, copy, consume_all(bootstrap, topics), *topics)


# A session on the cluster computes rows once (as an AUTO CDC batch does its changes), loses a
# worker and its executor, then reads the rows: what the batch's MERGE and append do next.
ROWS_OUTLIVE_A_WORKER = """
import sys, time
from pathlib import Path
from pyspark.sql import functions as F
from exactly_once.settings.engine import load_engine
from exactly_once.services import cluster
from exactly_once.local.engine.deployment import deployment
from exactly_once.local.engine.materialize import computed_once
from exactly_once.local.engine.session import build_session

master, home, scratch = sys.argv[1:4]
engine = load_engine("local", master=master)
spark = build_session(scratch, log_level="OFF", deployment=deployment(engine, scratch))
deadline = time.monotonic() + 120
while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # driver + 2 executors
    assert time.monotonic() < deadline, "the cluster's two executors did not register"
    time.sleep(0.1)
def executor_jvm(_):  # in an executor's Python worker: its executor JVM's JIT level, and
    import os, re     # whether that JVM mapped the class archive (it does if the archive fits)
    from exactly_once.paths import CLASS_ARCHIVE
    pid, command = os.getpid(), lambda pid: Path(f"/proc/{pid}/cmdline").read_bytes()
    while pid > 1 and b"CoarseGrainedExecutorBackend" not in command(pid):
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    found = re.findall(rb"-XX:TieredStopAtLevel=(\\d)", command(pid))
    mapped = str(CLASS_ARCHIVE.resolve()) in Path(f"/proc/{pid}/maps").read_text()
    yield found[-1].decode() if found else "4", mapped
print("executors' JIT level, class archive mapped:", sorted(set(
    spark.sparkContext.parallelize(range(4), 4).mapPartitions(executor_jvm).collect())))
rows = computed_once(spark.range(0, 1000, numPartitions=4).withColumn("twice", F.col("id") * 2))
info = cluster.status(Path(home))
cluster.kill_worker(info, 1)
print(tuple(rows.agg(F.count("*"), F.sum("twice")).first()))
"""


def test_rows_computed_once_outlive_the_executor_that_computed_them(spark_cluster, tmp_path):
    """A local checkpoint's blocks die with their executor, and with them the batch: the CI run
    of 2026-11-24 lost a worker between a batch's changes and its MERGE
    (CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND). On a cluster the changes are kept by the driver."""
    try:
        done = subprocess.run([sys.executable, "-c", ROWS_OUTLIVE_A_WORKER, spark_cluster.url,
                               str(spark_cluster.home), str(tmp_path / "scratch")],
                              capture_output=True, text=True, timeout=600,
                              env=os.environ | {"EXACTLY_ONCE_HOME": str(tmp_path / "home")})
    finally:
        cluster.start(spark_cluster.home, port=spark_cluster.port)  # the worker back
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "(1000, 999000)"
    # The session's process runs one small job, with EXACTLY_ONCE_JIT=c1 (tests/conftest.py):
    # its executors, which live as long as it does, compile with C1 alone too, and start from
    # the driver's class archive (`make setup` builds it).
    assert "executors' JIT level, class archive mapped: [('1', True)]" in \
        done.stdout.splitlines()


def object_store(server: S3Server, monkeypatch: pytest.MonkeyPatch) -> files.ObjectStore:
    """This process reaching the test's store (credentials through the environment)."""
    for key, value in server.environment().items():
        monkeypatch.setenv(key, value)
    settings = ObjectStoreSettings(endpoint=server.endpoint)
    monkeypatch.setattr(files, "_settings", settings)  # what use_object_store sets, undone after
    return files.ObjectStore(server.bucket, settings)


def test_the_lock_on_the_object_store_is_a_conditional_create(s3_store, monkeypatch):
    object_store(s3_store, monkeypatch)
    warehouse = files.location(f"s3a://{s3_store.bucket}/locked")
    lock = warehouse / "_pipeline" / "lock"
    with WarehouseLock(warehouse):
        assert lock.is_file()
        with pytest.raises(Exception, match="is in use by an update of pid"):
            WarehouseLock(warehouse).__enter__()
    assert not lock.exists()

    # a holder on this host whose process is gone (a killed run): the next update takes over
    lock.write_text(json.dumps({"pid": 999999999, "host": socket.gethostname(), "started": 1}))
    with WarehouseLock(warehouse):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    # a holder on another host cannot be checked from here: refused, with what to do
    lock.write_text('{"pid": 1, "host": "elsewhere", "since": "then"}')
    with pytest.raises(Exception, match=f"delete {lock}"):
        WarehouseLock(warehouse).__enter__()


def test_the_store_is_reached_with_the_credentials_of_the_moment(s3_store, monkeypatch):
    """Credentials changed in this process reach the store at once: a client made earlier with
    other credentials for the same endpoint is not reused (the CI run of 2026-11-23 reused the
    fake key of test_cli_errors when the store's port came round again)."""
    object_store(s3_store, monkeypatch)
    path = files.location(f"s3a://{s3_store.bucket}/credentials/object")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    with pytest.raises(ObjectStoreError, match="refused .*No user exists"):
        path.write_text("written")
    object_store(s3_store, monkeypatch)
    path.write_text("written")
    assert path.read_text() == "written"


def test_a_snapshot_flow_s_version_log_is_on_the_store(s3_store, monkeypatch, tmp_path):
    """AUTO CDC FROM SNAPSHOT records its versions beside the target's state, on the store (the
    clean-clone run of 2026-11-23 found it under ./s3a:/ in the working directory)."""
    object_store(s3_store, monkeypatch)
    monkeypatch.chdir(tmp_path)
    state = f"s3a://{s3_store.bucket}/versions/_pipeline/auto_cdc/players_history"
    for ordinal in (0, 1):
        snapshot_versions.record(state, AppliedSnapshot(ordinal, date(2026, 11, 20 + ordinal)))
    assert snapshot_versions.latest(state) == (1, date(2026, 11, 21))
    assert files.location(f"{state}/{snapshot_versions.LOG_FILE}").is_file()
    assert list(tmp_path.iterdir()) == [], "nothing written in the working directory"


def test_cluster_commands(tmp_path, capsys):
    """Start twice is harmless, a port in use and a dead worker are one line each, stop
    leaves no process; a bad or silent master is one line before any JVM starts."""
    home, port = tmp_path / "cluster", free_port()
    start = ["cluster", "start", "--port", str(port), "--workers", "1", "--home", str(home)]
    assert main(start) == 0
    first = cluster.status(home)
    assert main(start) == 0 and cluster.status(home) == first
    assert main(["cluster", "status", "--home", str(home)]) == 0

    assert main(["cluster", "start", "--port", str(port), "--home", str(tmp_path / "b")]) == 1
    assert first is not None
    cluster.kill_worker(first, 1)
    deadline = time.monotonic() + 10
    while pid_alive(first.workers[0].pid) and time.monotonic() < deadline:
        reap(first.workers[0].pid)
        time.sleep(0.05)
    assert main(["cluster", "status", "--home", str(home)]) == 1
    assert main(["cluster", "stop", "--home", str(home)]) == 0
    assert cluster.processes_of(home) == [], "stop leaves no process"
    assert main(["cluster", "status", "--home", str(home)]) == 3

    dump = write_tiny_dump(tmp_path / "dump.jsonl")
    for master in ("spark://nowhere", f"spark://127.0.0.1:{free_port()}"):
        assert main(["run", "--master", master, "--source", f"file:{dump}",
                     "--warehouse", str(tmp_path / "warehouse")]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line]
    assert errors == [
        f"exactly-once: error: port {port} (master) is already in use by another process",
        f"exactly-once: error: worker-1 (pid {first.workers[0].pid}) of the cluster at "
        f"{first.url} is not running; see {home / 'logs' / 'worker-1.out'}, then "
        "`exactly-once cluster stop` and `cluster start`",
        "exactly-once: error: master must be local[N] or spark://HOST:PORT, got "
        "'spark://nowhere'",
        errors[-1]]
    assert errors[-1].startswith("exactly-once: error: no Spark master answers at spark://")
