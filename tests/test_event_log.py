"""The local event log: Databricks-shaped flow_progress rows, one per flow per update."""

from __future__ import annotations

import re
from datetime import date

from spark_probes import runs_python_worker

from exactly_once.local.auto_cdc.from_snapshot.versions import AppliedSnapshot
from exactly_once.local.graph.expectations import ExpectationMetric
from exactly_once.local.inspect.delivery import utc
from exactly_once.local.observe import event_log
from exactly_once.local.observe.progress import FlowResult
from exactly_once.local.observe.timeline import Span
from exactly_once.local.storage.warehouse import Warehouse


def _log(spark, run):
    path = Warehouse(run.warehouse).event_log_path()
    spark.read.format("delta").load(str(path)).createOrReplaceTempView("event_log_under_test")
    return "event_log_under_test"


def test_one_flow_progress_row_per_flow_per_update(spark, quality_run):
    log = _log(spark, quality_run)
    rows = spark.sql(f"""
        SELECT origin.update_id, origin.flow_name, origin.dataset_name,
               details.flow_progress.status AS status,
               details.flow_progress.metrics.num_output_rows AS num_output_rows
        FROM {log} WHERE event_type = 'flow_progress'""").collect()
    assert len({r.update_id for r in rows}) == 1
    assert sorted(r.flow_name for r in rows) == sorted(f.flow for f in quality_run.result.flows)
    assert {r.status for r in rows} == {"COMPLETED"}
    output = {r.flow_name: r.num_output_rows for r in rows}
    for flow in quality_run.result.flows:
        assert output[flow.flow] == flow.output_rows
    # Append flows: what they wrote is what the table holds after one full-refresh update.
    for table in ("bronze_kafka_events", "silver_orders", "silver_player_rewards", "player_xp"):
        assert output[table] == quality_run.result.table_rows[table]


def test_a_snapshot_flow_lists_each_snapshot_it_applied(spark, quality_run):
    """players_history over the sample players export: per snapshot, by key, what changed."""
    log = _log(spark, quality_run)
    rows = spark.sql(f"""
        SELECT s.version, s.rows, s.rows_inserted, s.rows_updated, s.rows_deleted
        FROM {log} LATERAL VIEW explode(details.flow_progress.snapshots) x AS s
        WHERE event_type = 'flow_progress' AND origin.flow_name = 'players_history'
        """).collect()
    assert [tuple(r) for r in rows] == [("2026-11-20", 12, 12, 0, 0), ("2026-11-21", 13, 2, 7, 1)]
    flow = next(f for f in quality_run.result.flows if f.flow == "players_history")
    assert (flow.batches, flow.input_rows, flow.output_rows) == (2, 25, 22)


def test_expectations_in_the_databricks_shape(spark, quality_run):
    log = _log(spark, quality_run)
    rows = spark.sql(f"""
        SELECT origin.flow_name, e.name, e.dataset, e.passed_records, e.failed_records,
               details.flow_progress.data_quality.dropped_records AS dropped
        FROM {log}
        LATERAL VIEW explode(details.flow_progress.data_quality.expectations) x AS e
        WHERE event_type = 'flow_progress'""").collect()
    # A view's expectations are counted by the flow that reads it (it evaluates the view).
    by_key = {(r.flow_name, r.dataset, r.name): r for r in rows}
    flows = {f.flow: f for f in quality_run.result.flows}
    for flow in ("silver_orders", "silver_player_rewards"):
        assert flows[flow].expectations, f"{flow} reads a checked view: its counts are its own"
        for m in flows[flow].expectations:
            r = by_key[(flow, m.dataset, m.name)]
            assert (r.passed_records, r.failed_records) == (m.passed_records, m.failed_records)
    for flow in ("orders", "orders_history", "player_xp_ledger", "player_xp"):
        assert not flows[flow].expectations  # gold reads silver: each rule is counted once
    assert any(r.failed_records > 0 for r in rows)
    # The quarantine's own sanity expectation (warn) holds for every quarantined record.
    q = [r for r in rows if r.name == "names_its_reasons"]
    assert sum(r.passed_records for r in q) == quality_run.result.table_rows["quarantine"]
    assert all(r.failed_records == 0 for r in q)


def test_redelivery_counters(spark, quality_run):
    log = _log(spark, quality_run)
    totals = spark.sql(f"""
        SELECT sum(details.flow_progress.metrics.num_duplicates_dropped) AS duplicates,
               sum(details.flow_progress.metrics.num_stale_updates_ignored) AS stale,
               sum(details.flow_progress.metrics.num_late_events) AS late
        FROM {log} WHERE event_type = 'flow_progress'""").first()
    result = quality_run.result
    assert totals.duplicates == result.total("duplicates_dropped") > 0
    assert totals.stale == result.total("cdc_stale")
    assert totals.late == result.total("late_rows_dropped")


def test_an_event_log_from_before_snapshot_flows_gains_their_column(spark, tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    before = re.sub(r",\s*snapshots: ARRAY<STRUCT<[^>]*>>", "", event_log.DDL)
    assert before != event_log.DDL
    spark.createDataFrame([], before).write.format("delta").save(
        str(warehouse.event_log_path()))
    applied = AppliedSnapshot(0, date(2026, 11, 20), rows=12, inserted=12)
    event_log.append(spark, warehouse, [FlowResult(
        flow="players_history", target="players_history", kind="auto_cdc_from_snapshot",
        snapshots=[applied])], "an-update")
    (row,) = event_log.read(spark, warehouse).collect()
    assert [tuple(s) for s in row.details.flow_progress.snapshots] == [
        ("2026-11-20", 12, 12, 0, 0)]


def test_an_update_s_rows_become_a_dataframe_in_the_jvm_without_a_python_worker(spark):
    """PySpark makes a DataFrame of a Python list through its Python worker, a process each new
    JVM starts for it (0.8 s of a new process's first update: BENCHMARKS.md). The event log's
    rows go through Arrow instead, built in the JVM, every value as it was."""
    failed = FlowResult(flow="orders", target="orders", kind="auto_cdc", status="FAILED",
                        error="boom", seconds=1.23456)
    checked = FlowResult(flow="silver_orders", target="silver_orders", kind="append",
                         batches=2, input_rows=10, output_rows=8, duplicates_dropped=2,
                         dropped_records=1,
                         expectations=[ExpectationMetric("valid", "silver_orders", 9, 1)])
    snapshots = FlowResult(flow="players_history", target="players_history",
                           kind="auto_cdc_from_snapshot",
                           snapshots=[AppliedSnapshot(0, date(2026, 11, 20), rows=12, inserted=12)])
    spans = [(Span("orders", "target merge", 0.5, 1.25, batch=0, detail="orders", spark_jobs=11,
                   spark_tasks=20, spark_job_seconds=0.75), 1.0),
             (Span("orders", "changes", 0.1, 0.3), 0.3)]
    rows = [event_log.flow_progress_row(result, "an-update", 7 + i, "a-pipeline")
            for i, result in enumerate([failed, checked, snapshots])]
    rows.append(event_log.flow_timeline_row("orders", "orders", spans, "an-update", 10,
                                            "a-pipeline"))

    frame = event_log.as_frame(spark, rows)

    assert not runs_python_worker(frame)
    collected = frame.collect()
    assert [utc(r.timestamp) for r in collected] == [row[3] for row in rows]
    assert [r[:3] + r[4:] for r in collected] == [row[:3] + row[4:] for row in rows]
