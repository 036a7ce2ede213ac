"""Every error class reaches the user as one line on stderr and exit code 1, never a traceback.

Each class is raised by the real code that raises it, through `exactly-once` as a user runs it
where that is cheap (no Spark). Where the error comes out of a pipeline update, `main` runs the
real command in-process with the session replaced by a stand-in (no JVM starts), and the update
is either the real one (the warehouse lock) or real graph code that raises. A flow that fails
in Spark (a dump that is not JSON) runs a real update in the suite's Spark session.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import date

import pytest

from exactly_once import cli
from exactly_once.errors import (
    BrokerError,
    BundleError,
    CliError,
    ClusterError,
    EngineError,
    ExactlyOnceError,
    ExpectationError,
    FlowError,
    GraphError,
    InspectError,
    KcatFormatError,
    MissingJarsError,
    ObjectStoreError,
    ProducerError,
    QualityError,
    RefreshError,
    SchemaChangeError,
    SettingsError,
    SnapshotError,
    WarehouseLockedError,
)
from exactly_once.local.auto_cdc.from_snapshot import versions as snapshot_versions
from exactly_once.local.engine import jvm_parts, session
from exactly_once.local.execution import pipeline, schema_check
from exactly_once.local.execution.refresh import RefreshSelection, plan_refresh
from exactly_once.local.execution.schema_check import Breakage
from exactly_once.local.graph import expectations
from exactly_once.local.graph.dataflow import (
    APPEND,
    STREAMING_TABLE,
    Dataflow,
    DatasetNode,
    FlowNode,
    Read,
)
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.storage.lock import WarehouseLock
from exactly_once.services.processes import free_port

ERROR = "exactly-once: error: "
TESTED: set[type[ExactlyOnceError]] = set()


def covers(error: type[ExactlyOnceError]):
    def mark(test):
        TESTED.add(error)
        return test
    return mark


def cli_run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "exactly_once.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def only_error_line(stderr: str) -> str:
    """The one line a failed command prints, without its prefix."""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), stderr
    return lines[0].removeprefix(ERROR)


def in_process_error_line(capsys) -> str:
    return only_error_line(capsys.readouterr().err)


def write_dump(path, lines: list[str]):
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def a_dump(tmp_path):
    return write_dump(tmp_path / "dump.jsonl",
                      [json.dumps({"topic": "orders", "key": "o1", "payload": "{}"})])


class SessionStandIn:
    """Stands in for the SparkSession a command starts: the failures below come before any
    query, and no JVM has to start for them."""

    class conf:  # noqa: N801  (spelled as SparkSession.conf)
        @staticmethod
        def set(key: str, value: str) -> None:
            pass

    def stop(self) -> None:
        pass


@pytest.fixture
def no_spark(monkeypatch):
    monkeypatch.setattr(session, "build_session", lambda *args, **kwargs: SessionStandIn())


def run(tmp_path, *extra: str) -> int:
    return cli.main(["run", "--source", f"file:{a_dump(tmp_path)}",
                     "--warehouse", str(tmp_path / "warehouse"), *extra])


# -- through the command line, as a user runs it -------------------------------------------------
@covers(CliError)
def test_a_missing_file_to_produce():
    done = cli_run("produce", "/no/such/file.jsonl")
    assert done.returncode == 1
    assert only_error_line(done.stderr) == "no such file: /no/such/file.jsonl"


@covers(SettingsError)
def test_a_setting_conf_does_not_have():
    done = cli_run("run", "--set", "kafka.no_such_setting=1")
    assert done.returncode == 1
    assert only_error_line(done.stderr) == (
        "cannot set 'kafka.no_such_setting=1': expected KEY=VALUE with KEY a setting of conf/, "
        "e.g. kafka.fail_on_data_loss=false")


def test_a_jit_the_runtime_does_not_have(tmp_path):
    """EXACTLY_ONCE_JIT is checked before a JVM starts (engine/jvm_options.py)."""
    done = subprocess.run([sys.executable, "-m", "exactly_once.cli", "run", "--source",
                           f"file:{a_dump(tmp_path)}", "--warehouse", str(tmp_path / "wh")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EXACTLY_ONCE_JIT": "fast"})
    assert done.returncode == 1
    assert only_error_line(done.stderr) == (
        "EXACTLY_ONCE_JIT=fast: the JIT is one of tiered, c1 (the default: tiered)")
    assert not (tmp_path / "wh").exists()


@covers(BundleError)
def test_an_unknown_target():
    """`--target` names the bundle's target (and conf/'s, of the same name)."""
    done = cli_run("--target", "staging", "run")
    assert done.returncode == 1
    assert only_error_line(done.stderr) == ("databricks.yml: targets: no target `staging`; the "
                                            "bundle's targets: dev, prod")


@covers(KcatFormatError)
def test_a_kcat_file_with_a_bad_line(tmp_path):
    good = json.dumps({"topic": "orders", "key": "o1", "payload": "{}"})
    dump = write_dump(tmp_path / "dump.jsonl", [good, '{"key": "o1"}', good])
    done = cli_run("produce", str(dump))
    assert done.returncode == 1
    assert only_error_line(done.stderr) == f"{dump}:2: missing or empty 'topic'"


@covers(InspectError)
def test_a_table_of_a_warehouse_that_has_none(tmp_path):
    done = cli_run("show", "orders", "--warehouse", str(tmp_path))
    assert done.returncode == 1
    assert only_error_line(done.stderr) == \
        f"no table `orders` in {tmp_path} or the local catalog ({tmp_path / '_catalog'}); it " \
        f"has no tables yet; run `exactly-once run` first"


@covers(BrokerError)
def test_a_broker_port_someone_else_listens_on(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        done = cli_run("broker", "start", "--port", str(port), "--home", str(tmp_path))
    assert done.returncode == 1
    assert only_error_line(done.stderr) == f"port {port} is already in use by another process"


@covers(ProducerError)
def test_a_record_for_a_partition_the_topic_lacks(kafka_broker, tmp_path):
    record = {"topic": "orders", "partition": 7, "key": "o1", "payload": "{}"}  # it has 2
    dump = write_dump(tmp_path / "dump.jsonl", [json.dumps(record)])
    done = cli_run("produce", str(dump), "--bootstrap-servers", kafka_broker.bootstrap)
    assert done.returncode == 1
    line = only_error_line(done.stderr)
    assert kafka_broker.bootstrap in line and "Unknown partition" in line, line


@covers(FlowError)
def test_a_dump_that_is_not_json_fails_its_flow(tmp_path, in_session, capsys):
    """A real update, in the suite's session: the Kafka source's reader stops at the broken
    line. (That a process's stderr holds the line alone, the JVM's notes in its log, is
    test_broker_faults' killed run: a cold JVM costs 20-40 s.)"""
    dump = write_dump(tmp_path / "dump.jsonl", ["{not json"])
    assert cli.main(["run", "--quiet", "--source", f"file:{dump}",
                     "--warehouse", str(tmp_path / "warehouse")]) == 1
    assert in_process_error_line(capsys).startswith("flow `bronze_kafka_events` failed: ")


# -- in-process, before Spark starts -------------------------------------------------------------
@covers(MissingJarsError)
def test_missing_spark_jars(tmp_path, monkeypatch, capsys):
    """No clone's jars, none in the user cache, and Maven Central out of reach."""
    monkeypatch.setattr(jvm_parts, "JARS_DIR", tmp_path / "no-jars")
    monkeypatch.setattr(jvm_parts, "USER_CACHE", tmp_path / "cache")
    repository = f"http://127.0.0.1:{free_port()}/maven2"
    monkeypatch.setattr(jvm_parts, "MAVEN_CENTRAL", repository)
    assert run(tmp_path) == 1
    assert in_process_error_line(capsys).startswith(
        f"cannot download {repository}/commons-logging/commons-logging/1.3.0/"
        f"commons-logging-1.3.0.jar: ")


@covers(WarehouseLockedError)
def test_a_warehouse_another_update_holds(tmp_path, no_spark, capsys):
    """The real update: it stops at the lock, before it loads the pipeline."""
    with WarehouseLock(tmp_path / "warehouse"):
        assert run(tmp_path) == 1
    assert in_process_error_line(capsys).startswith(
        f"warehouse {tmp_path / 'warehouse'} is in use by an update of pid ")


@covers(ClusterError)
def test_a_master_that_does_not_answer(tmp_path, no_spark, capsys):
    """Before any JVM starts: Spark itself would retry for a minute, then print a trace."""
    master = f"spark://127.0.0.1:{free_port()}"
    assert run(tmp_path, "--master", master) == 1
    assert in_process_error_line(capsys) == (
        f"no Spark master answers at {master}; start the local cluster with "
        "`exactly-once cluster start`, or name a running master")


@covers(EngineError)
def test_an_engine_that_cannot_start_its_session(tmp_path):
    """`engine start` waits for the engine to be warm: when its JVM cannot start, one line with
    the end of the engine's log, and no engine left behind."""
    env = os.environ | {"EXACTLY_ONCE_HOME": str(tmp_path), "JAVA_HOME": "/nonexistent"}
    done = subprocess.run([sys.executable, "-m", "exactly_once.cli", "engine", "start"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    line = only_error_line(done.stderr)
    assert line.startswith("the engine exited with 1 while starting: the Spark session did not "
                           "start: [JAVA_GATEWAY_EXITED] "), line
    assert line.endswith(f"(its log: {tmp_path / 'engine' / 'engine.log'})"), line
    status = subprocess.run([sys.executable, "-m", "exactly_once.cli", "engine", "status"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert (status.returncode, status.stdout) == (3, "no engine running\n")


@covers(ObjectStoreError)
def test_an_object_store_that_does_not_answer(tmp_path, no_spark, capsys, monkeypatch):
    """The update's first touch of the store, its lock, fails with one line naming it."""
    from exactly_once.local.storage import files

    endpoint = f"http://127.0.0.1:{free_port()}"
    for key, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "k",
                       "AWS_SECRET_ACCESS_KEY": "s"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(files, "_settings", files._settings)  # what the command sets, undone
    assert run(tmp_path, "--warehouse", "s3a://lake/warehouse") == 1
    assert in_process_error_line(capsys).startswith(
        f"cannot reach the object store s3a://lake ({endpoint}): ")
    assert run(tmp_path, "--warehouse", "gs://lake/warehouse") == 1
    assert in_process_error_line(capsys) == (
        "gs://lake/warehouse: a warehouse is a local directory or s3a://BUCKET/PREFIX "
        "(Hadoop's S3A connector); other schemes are not supported")


@covers(QualityError)
def test_a_dashboard_of_a_warehouse_without_an_event_log(tmp_path, no_spark, capsys):
    (tmp_path / "warehouse").mkdir()
    assert cli.main(["quality", "dashboard", "--warehouse", str(tmp_path / "warehouse"),
                     "--output", str(tmp_path / "dashboard.html")]) == 1
    assert in_process_error_line(capsys) == \
        f"no event log in {tmp_path / 'warehouse'}; run the pipeline first"


# -- in-process, an update whose pipeline code raises (real graph code, no Spark) ----------------
def update_raising(monkeypatch, declare) -> None:
    """The update runs `declare` where it would load and plan the pipeline."""
    monkeypatch.setattr(pipeline, "run_pipeline", lambda *args, **kwargs: declare())


@covers(ExpectationError)
def test_a_misdeclared_expectation(tmp_path, monkeypatch, no_spark, capsys):
    """A decorator above @dp.table (given None) raises at once; test_declaration_errors runs
    the others, which raise once their dataset is known."""
    update_raising(monkeypatch,
                   lambda: expectations.expect_or_drop("positive", "amount >= 0")(None))
    assert run(tmp_path) == 1
    assert in_process_error_line(capsys) == ("expectation decorators go below @dp.table / "
                                             "@dp.materialized_view / @dp.append_flow, on the "
                                             "function")


@covers(GraphError)
def test_a_sql_pipeline_file(tmp_path, monkeypatch, no_spark, capsys):
    update_raising(monkeypatch, lambda: PipelineGraph().register_sql(
        "CREATE MATERIALIZED VIEW v AS SELECT 1", tmp_path / "v.sql"))
    assert run(tmp_path) == 1
    assert in_process_error_line(capsys) == \
        f"{tmp_path / 'v.sql'}: SQL pipeline files are not supported by the local runtime"


@covers(SnapshotError)
def test_a_snapshot_older_than_the_last_applied(tmp_path, monkeypatch, no_spark, capsys):
    update_raising(monkeypatch, lambda: snapshot_versions.check_next(
        "players_history", "next_players_export(datetime.date(2026, 11, 21))",
        date(2026, 11, 20), date(2026, 11, 21)))
    assert run(tmp_path) == 1
    assert in_process_error_line(capsys) == (
        "AUTO CDC FROM SNAPSHOT flow `players_history`: next_players_export(datetime.date(2026, "
        "11, 21)) gave the version 2026-11-20, older than the last applied version 2026-11-21; "
        "versions must increase strictly")


@covers(RefreshError)
def test_a_refresh_of_a_table_the_pipeline_lacks(tmp_path, monkeypatch, no_spark, capsys):
    update_raising(monkeypatch, lambda: plan_refresh(PipelineGraph(),
                                                     RefreshSelection.of(refresh=["nope"])))
    assert run(tmp_path, "--refresh", "nope") == 1
    assert in_process_error_line(capsys).startswith("unknown table `nope`")


@covers(SchemaChangeError)
def test_a_change_the_tables_cannot_take(tmp_path, monkeypatch, no_spark, capsys):
    """test_contract_evolution.py refuses real changes through real updates."""
    flows = Dataflow(datasets=[DatasetNode("parsed", STREAMING_TABLE, "p.py"),
                               DatasetNode("gold", STREAMING_TABLE, "g.py")],
                     flows=[FlowNode("gold", "gold", APPEND, (Read("parsed", True),), "g.py")])
    update_raising(monkeypatch, lambda: (_ for _ in ()).throw(schema_check.refusal(
        [Breakage("gold", "`x` removed"), Breakage("parsed", "`x` removed")], flows)))
    assert run(tmp_path) == 1
    assert in_process_error_line(capsys) == (
        "the tables cannot take this change of the pipeline, nothing was written: `x` removed; "
        "it breaks parsed, gold; rebuild them from bronze with `exactly-once rederive parsed`")


# -- the rule itself -----------------------------------------------------------------------------
def test_every_error_class_has_a_test_above():
    # The broker faults' errors come out of minutes-long updates against a broker a test kills
    # or lets retention empty, and the declaration errors and Auto Loader's stop each want a
    # pipeline of their own, and a bundle's and the local catalog's errors a bundle of their
    # own (test_your_bundle): those tests live in their own modules and register here.
    import test_auto_loader  # noqa: F401
    import test_broker_faults  # noqa: F401
    import test_bundle_errors  # noqa: F401
    import test_declaration_errors  # noqa: F401
    import test_your_bundle  # noqa: F401

    def subclasses(cls: type) -> set[type]:
        return {sub for direct in cls.__subclasses__() for sub in {direct, *subclasses(direct)}}

    assert subclasses(ExactlyOnceError) == TESTED


def test_a_message_of_several_lines_is_printed_as_one(capsys, monkeypatch):
    def broker_log_tail(args):
        raise BrokerError("broker exited during startup:\nERROR one\n\n  ERROR two  ")

    monkeypatch.setattr(cli.broker, "handle", broker_log_tail)
    assert cli.main(["broker", "status"]) == 1
    assert in_process_error_line(capsys) == \
        "broker exited during startup: | ERROR one | ERROR two"
