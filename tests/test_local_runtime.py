"""The local runtime: loading pipeline files unchanged, dependency order, clear graph errors."""

from __future__ import annotations

import contextlib
import io
import json
import textwrap

import pytest
from events import grant
from pyspark.pipelines.output import MaterializedView, StreamingTable, TemporaryView
from spark_probes import last_execution_id, last_operation, sql_plans_since

from exactly_once.errors import DeclarationError, GraphError
from exactly_once.local.auto_cdc.from_snapshot.spec import SnapshotCdcSpec
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.execution.update import PipelineUpdate
from exactly_once.local.graph.loader import load_graph
from exactly_once.local.graph.reads import resolved_reads
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.snapshot_files import PATHS_LISTED_IN_DRIVER
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.paths import PIPELINES_DIR, pipeline_files


def test_the_project_pipeline_declares_the_medallion_graph(spark, settings):
    for key, value in settings.to_conf().items():
        spark.conf.set(key, value)
    graph = load_graph(spark, pipeline_files(PIPELINES_DIR))
    # pyspark's output classes (Databricks' arguments ride on subclasses of them).
    kinds = {name: next(kind for kind in (StreamingTable, MaterializedView, TemporaryView)
                        if isinstance(output, kind)) for name, output in graph.outputs.items()}
    assert kinds == {
        "bronze_kafka_events": StreamingTable, "parsed_orders": StreamingTable,
        "parsed_player_rewards": StreamingTable, "silver_orders": StreamingTable,
        "silver_player_rewards": StreamingTable, "quarantine": StreamingTable,
        "orders": StreamingTable, "player_xp": MaterializedView,
        "checked_orders": TemporaryView, "checked_player_rewards": TemporaryView,
        "player_xp_ledger": StreamingTable, "xp_grants_in_time": TemporaryView,
        "late_events": StreamingTable, "orders_history": StreamingTable,
        "xp_grant_arrivals": TemporaryView, "players_history": StreamingTable,
    }
    assert sorted(f.name for f in graph.flows_into("quarantine")) == [
        "quarantine_orders", "quarantine_player_rewards"]
    cdc = {flow.target: (flow.source, flow.keys) for flow in graph.auto_cdc_flows}
    assert cdc["orders"] == ("silver_orders", ("order_id",))
    assert cdc["player_xp_ledger"] == ("xp_grants_in_time", ("event_id",))
    assert cdc["late_events"] == ("xp_grant_arrivals", ("event_id",))
    (snapshots,) = graph.snapshot_flows  # reference data from its daily export, not Kafka
    assert (snapshots.target, snapshots.keys, snapshots.stored_as_scd_type) == (
        "players_history", ("player_id",), 2)
    assert snapshots.source_label() == "next_players_export()"
    protected = {t.name for t in graph.tables()
                 if graph.table_properties(t.name).get("pipelines.reset.allowed") == "false"}
    assert protected == {"bronze_kafka_events", "player_xp_ledger", "late_events"}


def test_each_record_is_parsed_once_and_gold_reads_silver(spark, quality_run):
    """Every flow's query, built from the pipeline files over the tables of a real run: which
    tables it scans, and whether its plan parses JSON. Only `parsed_<topic>` does."""
    graph = load_graph(spark, pipeline_files(PIPELINES_DIR))
    warehouse = Warehouse(quality_run.warehouse)
    scanned: set[str] = set()

    def resolve(name, streaming, options=None):
        if name not in graph.outputs:
            return None
        if graph.is_view(name):  # a view is its query, inlined into the reader's
            (view,) = graph.flows_into(name)
            return view.func()
        scanned.add(name)
        reader = spark.readStream if streaming else spark.read
        return reader.format("delta").load(str(warehouse.table_path(name)))

    reads, parses = {}, set()
    with resolved_reads(resolve):
        for table in graph.tables():
            for flow in graph.flows_into(table.name):
                if table.name == "bronze_kafka_events":
                    continue  # reads Kafka, not a dataset
                scanned.clear()
                if isinstance(flow, SnapshotCdcSpec):  # its first snapshot, as an update asks
                    df = flow.source_function(None)[0]
                else:
                    df = resolve(flow.source, True) if isinstance(flow, AutoCdcSpec) \
                        else flow.func()
                reads[flow.name] = scanned.copy()
                with contextlib.redirect_stdout(io.StringIO()) as plan:
                    df.explain(extended=True)
                if "parse_json" in plan.getvalue():
                    parses.add(flow.name)
    assert reads == {
        "parsed_orders": {"bronze_kafka_events"},
        "parsed_player_rewards": {"bronze_kafka_events"},
        "silver_orders": {"parsed_orders"},
        "silver_player_rewards": {"parsed_player_rewards"},
        "quarantine_orders": {"parsed_orders"},
        "quarantine_player_rewards": {"parsed_player_rewards"},
        "orders": {"silver_orders"},
        "orders_history": {"silver_orders"},
        "player_xp_ledger": {"silver_player_rewards"},
        "late_events": {"silver_player_rewards"},
        "player_xp": {"player_xp_ledger"},
        "players_history": set(),  # the players export's files
    }
    assert parses == {"parsed_orders", "parsed_player_rewards"}

def write_pipeline(directory, source: str):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "defs.py").write_text(textwrap.dedent(source))
    return pipeline_files(directory)


def test_datasets_run_after_what_they_read_whatever_the_file_order(spark, tmp_path):
    files = write_pipeline(tmp_path / "p", """
        from pyspark import pipelines as dp

        @dp.materialized_view(name="doubled")  # declared first, reads `numbers`
        def doubled():
            return spark.read.table("numbers").selectExpr("id * 2 AS id")

        @dp.temporary_view(name="numbers_view")
        def numbers_view():
            return spark.range(3)

        @dp.materialized_view(name="numbers")
        def numbers():
            return spark.read.table("numbers_view")
    """)
    graph = load_graph(spark, files)
    update = PipelineUpdate(spark, graph, Warehouse(tmp_path / "wh"))
    result = update.run()
    assert [f.flow for f in result.flows] == ["numbers", "doubled"]
    assert result.table_rows == {"doubled": 3, "numbers": 3}
    assert not (tmp_path / "wh" / "numbers_view").exists()  # temporary views are not stored


def test_a_stream_of_a_table_is_built_while_the_table_updates_and_started_after(spark, tmp_path):
    """Past its query's first batch, a flow that streams a table builds its query (the pipeline
    file's function) without waiting for the table's update, and waits only before starting
    it: its rows are still every row the table has once its update ends. Built after the wait,
    the build's seconds were on the path from bronze to gold."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    files = write_pipeline(tmp_path / "p", f"""
        from pyspark import pipelines as dp

        @dp.table(name="raw")
        def raw():
            return spark.readStream.schema("n BIGINT").json("{inbox}")

        @dp.table(name="kept")
        def kept():
            return spark.readStream.table("raw").where("n % 2 = 0")
    """)
    graph = load_graph(spark, files)
    warehouse = Warehouse(tmp_path / "wh")
    for i in range(3):  # the third update is past each query's first batch
        numbers = range(i * 4, i * 4 + 4)
        (inbox / f"{i}.json").write_text("".join(f'{{"n": {n}}}\n' for n in numbers))
        result = PipelineUpdate(spark, graph, warehouse).run()
        spans = {s.phase: s for s in result.timeline.of_flow("kept")}
        waited = spans["wait for upstream"]
        assert waited.detail == "raw"
        built = spans["build query"]
        if i < 2:  # a new query: its first batch depends on the table's commits, so after them
            assert built.start <= waited.start and waited.end <= built.end
        else:
            assert built.end <= waited.start
    assert result.table_rows == {"raw": 12, "kept": 6}


def test_a_materialized_view_reads_its_upstream_as_the_files_its_log_names(spark, tmp_path):
    """A batch read of a pipeline dataset reads the Parquet files the dataset's log names
    (storage/snapshot_files.py): no query of the update scans the upstream's Delta log, as
    Delta's reader would, rebuilding the state of each version an append made. Same rows.
    The view's Spark jobs count in its own flow's timeline (`run --profile`)."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    files = write_pipeline(tmp_path / "p", f"""
        from pyspark import pipelines as dp
        from pyspark.sql import functions as F

        @dp.table(name="grants")
        def grants():
            return spark.readStream.schema("player STRING, xp BIGINT").json("{inbox}")

        @dp.materialized_view(name="totals")
        def totals():
            return spark.read.table("grants").groupBy("player").agg(F.sum("xp").alias("xp"))
    """)
    graph = load_graph(spark, files)
    warehouse = Warehouse(tmp_path / "wh")
    for i, grants in enumerate(([("a", 1), ("b", 2)], [("a", 3)])):
        (inbox / f"{i}.json").write_text(
            "".join(json.dumps({"player": p, "xp": xp}) + "\n" for p, xp in grants))
        before = last_execution_id(spark)
        result = PipelineUpdate(spark, graph, warehouse, timeline=Timeline(spark_jobs=True)).run()
    assert result.table_rows == {"grants": 3, "totals": 2}
    overwrite = [s for s in result.timeline.of_flow("totals") if s.phase == "delta overwrite"]
    assert overwrite and overwrite[0].spark_jobs >= 1
    # Delta's own jobs inside it too (`Delta: totals: Compute snapshot ...`): the view's table
    # at the version the first update wrote, rebuilt for the overwrite.
    assert any("Compute snapshot" in name for name in overwrite[0].spark_job_names)
    totals = spark.read.format("delta").load(str(tmp_path / "wh" / "totals")).collect()
    assert {r["player"]: r["xp"] for r in totals} == {"a": 4, "b": 2}
    grants_log = str(tmp_path / "wh" / "grants" / "_delta_log")
    plans = sql_plans_since(spark, before)
    assert plans, "the update's queries were not found in Spark's status store"
    assert [p for p in plans if grants_log in p] == []


def test_an_auto_cdc_state_of_many_files_is_compacted_after_its_flow(spark, tmp_path):
    """Each update appends a file to an AUTO CDC flow's state table; once they are more than
    half of the paths a read lists in the driver (4 here; Spark's 32), the flow compacts them
    after its batches (Delta's OPTIMIZE), so its next batches still read the state as files."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    files = write_pipeline(tmp_path / "p", f"""
        from pyspark import pipelines as dp

        @dp.temporary_view(name="changes")
        def changes():
            return spark.readStream.schema("id STRING, seq BIGINT, v STRING").json("{inbox}")

        dp.create_streaming_table(name="latest")
        dp.create_auto_cdc_flow(target="latest", source="changes", keys=["id"],
                                sequence_by="seq", stored_as_scd_type=1)
    """)
    graph = load_graph(spark, files)
    warehouse = Warehouse(tmp_path / "wh")
    state = str(warehouse.auto_cdc_tables("latest").state)
    spark.conf.set(PATHS_LISTED_IN_DRIVER, "4")
    try:
        for i in range(3):
            (inbox / f"{i}.json").write_text(json.dumps({"id": f"k{i}", "seq": 1, "v": "x"}))
            result = PipelineUpdate(spark, graph, warehouse).run()
            assert last_operation(state) == ("OPTIMIZE" if i == 2 else "WRITE")
    finally:
        spark.conf.unset(PATHS_LISTED_IN_DRIVER)
    assert result.table_rows["latest"] == 3
    assert len(delta_log.plain_parquet_files(state)) == 1
    assert any(s.phase == "compact state" for s in result.timeline.of_flow("latest"))


def test_a_cycle_is_reported_with_its_path(spark, tmp_path):
    files = write_pipeline(tmp_path / "p", """
        from pyspark import pipelines as dp

        @dp.materialized_view(name="a")
        def a():
            return spark.read.table("b")

        @dp.materialized_view(name="b")
        def b():
            return spark.read.table("a")
    """)
    with pytest.raises(GraphError, match="cycle: a -> b -> a"):
        PipelineUpdate(spark, load_graph(spark, files), Warehouse(tmp_path / "wh")).run()


def test_a_flow_into_an_undeclared_dataset_is_rejected(spark, tmp_path):
    files = write_pipeline(tmp_path / "p", """
        from pyspark import pipelines as dp

        @dp.append_flow(target="nowhere")
        def stray():
            return spark.range(1)
    """)
    with pytest.raises(GraphError, match="`stray` writes to `nowhere`"):
        load_graph(spark, files)


def test_an_auto_cdc_flow_gets_its_target_s_properties_wherever_the_target_is_declared(
        spark, tmp_path):
    files = write_pipeline(tmp_path / "p", """
        from pyspark import pipelines as dp

        @dp.temporary_view(name="changes")
        def changes():
            return spark.readStream.format("delta").load("/nowhere")

        dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"],
                                sequence_by="seq")  # before its target
        dp.create_streaming_table(name="current", table_properties={
            "pipelines.cdc.tombstoneGCThresholdInSeconds": "60"})
    """)
    (spec,) = load_graph(spark, files).auto_cdc_flows
    assert spec.target_properties == {"pipelines.cdc.tombstoneGCThresholdInSeconds": "60"}
    assert spec.tombstone_gc_seconds() == 60


def test_a_batch_query_into_a_streaming_table_names_the_flow(spark, tmp_path):
    """An append flow's batch query (a `@dp.table`'s makes a materialized view instead:
    test_dataset_declarations)."""
    files = write_pipeline(tmp_path / "p", """
        from pyspark import pipelines as dp

        dp.create_streaming_table("events")

        @dp.append_flow(target="events")
        def backfill():
            return spark.range(1)
    """)
    with pytest.raises(DeclarationError,
                       match="defs.py: dataset `events`: flow `backfill` writes to streaming "
                             "table `events`"):
        PipelineUpdate(spark, load_graph(spark, files), Warehouse(tmp_path / "wh")).run()


def test_full_refresh_rebuilds_from_bronze_and_a_plain_rerun_does_not(spark, settings, tmp_path):
    kcat = tmp_path / "events.jsonl"
    payload = json.dumps(grant("x1", "p1", 7))
    kcat.write_text(json.dumps({"topic": "player-rewards", "partition": 0, "offset": 0,
                                "ts": 1795255260000, "headers": ["h", "v"], "key": "p1",
                                "payload": payload}) + "\n")
    for odd in ("year=2026/a.json", "nested/month=11/b.json"):  # unrelated neighbours, which
        (tmp_path / odd).parent.mkdir(parents=True)  # a directory listing would take for
        (tmp_path / odd).write_text("{}\n")  # conflicting partitions
    local = type(settings).from_conf(
        (settings.to_conf() | {"exactly_once.source": f"file:{kcat}"}).get)
    warehouse = tmp_path / "wh"
    first = run_pipeline(spark, local, warehouse)
    again = run_pipeline(spark, local, warehouse)
    refreshed = run_pipeline(spark, local, warehouse, full_refresh=True)
    # Bronze is protected (pipelines.reset.allowed = false): kept, not re-read; everything
    # downstream is rebuilt from it.
    assert [r.flow_input("bronze_kafka_events") for r in (first, again, refreshed)] == [1, 0, 0]
    assert [r.flow_input("silver_player_rewards") for r in (first, again, refreshed)] == [1, 0, 1]
    assert refreshed.table_rows["player_xp"] == 1 and refreshed.table_rows["orders"] == 0
    (bronze,) = spark.read.format("delta").load(str(warehouse / "bronze_kafka_events")).collect()
    assert [(h["key"], bytes(h["value"])) for h in bronze["headers"]] == [("h", b"v")]
    assert bytes(bronze["value"]).decode() == payload  # bronze keeps the bytes as delivered
