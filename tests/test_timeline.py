"""Where an update's seconds go: the timeline in the event log, and `run --profile`."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from exactly_once import cli
from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.observe.timeline import UPDATE, WAIT_FOR_UPSTREAM
from exactly_once.local.storage.warehouse import Warehouse


def test_the_event_log_keeps_each_flow_s_phases(spark, quality_run):
    path = Warehouse(quality_run.warehouse).event_log_path()
    spark.read.format("delta").load(str(path)).createOrReplaceTempView("timeline_under_test")
    spans = spark.sql("""
        SELECT origin.flow_name AS flow, s.*
        FROM timeline_under_test LATERAL VIEW explode(details.flow_timeline.spans) x AS s
        WHERE event_type = 'flow_timeline'""").collect()
    by_flow: dict[str, list] = {}
    for s in spans:
        by_flow.setdefault(s.flow or UPDATE, []).append(s)
    flows = {f.flow for f in quality_run.result.flows}
    assert set(by_flow) == flows | {UPDATE}
    for flow in flows:
        phases = {s.phase for s in by_flow[flow]}
        assert "flow" in phases, (flow, phases)
        # Own time is never negative nor more than the span; micro-batches fit in their flow
        # (within the slack of progress reports' wall clock, timeline.py).
        whole = next(s for s in by_flow[flow] if s.phase == "flow")
        for s in by_flow[flow]:
            assert 0 <= s.self_seconds <= s.duration_seconds + 1e-3, s
            if s.batch_id is not None:
                assert s.start_seconds >= whole.start_seconds - 0.5, s
                assert (s.start_seconds + s.duration_seconds
                        <= whole.start_seconds + whole.duration_seconds + 0.5), s
    # Streaming flows show Structured Streaming's per-batch steps; AUTO CDC its own steps.
    silver = {s.phase for s in by_flow["silver_orders"]}
    assert {"query start", "addBatch", "foreachBatch"} <= silver, silver
    cdc = {s.phase for s in by_flow["orders"]}
    assert {"auto cdc batch", "plan"} <= cdc, cdc
    # (the "event log" span is still open while its own row is written)
    assert {"load pipeline files", "register tables", "row counts"} <= {
        s.phase for s in by_flow[UPDATE]}


def test_run_profile_prints_the_top_costs_and_writes_a_trace(in_session, tmp_path, capsys):
    """The command as a user runs it, in this process's Spark session."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    trace = tmp_path / "trace.json"
    run = ["run", "--quiet", "--source", f"file:{dumps}", "--warehouse",
           str(tmp_path / "warehouse"), "--profile", "--profile-output", str(trace)]
    for seed in (3, 4):  # the second update reads the second dump, with every query warm
        write_kcat_jsonl(dumps / f"stream-{seed}.jsonl", generate_stream(GeneratorConfig(
            events=40, orders=8, players=4, seed=seed,
            start=datetime(2026, 11, seed, tzinfo=timezone.utc))))
        assert cli.main(run) == 0
        out = capsys.readouterr().out
        processes = next(line for line in out.splitlines() if line.startswith(
            "Child processes the Spark JVM started during the update: "))
        # No chmod / readlink from the file system, no rm -rf from Spark's deletes (local_fs.py);
        # a new JVM's first update may start its once-per-JVM `env` (RocksDB) and `getconf`.
        assert "chmod" not in processes and "readlink" not in processes, processes
        assert "rm " not in processes, processes
    assert processes.endswith(": 0"), processes
    # Every expression of an update is interpreted (engine/update_settings.py): no class generated
    # per task and query (455 in this update when they were compiled). What is left are the
    # few Spark and Delta paths that call a code generator directly (Delta's write statistics,
    # a scan's partition columns, the dedup's state rows), once per JVM and schema, cached after.
    compiled = next(line for line in out.splitlines() if line.startswith(
        "Expression classes compiled during the update: "))
    assert int(compiled.rsplit(": ", 1)[1]) <= 20, compiled
    assert "Top costs of the " in out and "Trace (open in " in out and str(trace) in out
    table = out[out.index("Top costs"):out.index("Trace (open")].splitlines()[2:]
    assert table and all(WAIT_FOR_UPSTREAM not in line for line in table)
    columns = [line.split() for line in table]
    seconds = [float(c[-5]) for c in columns]
    assert seconds == sorted(seconds, reverse=True)
    # The JVM's CPU of each phase: the driver's (its thread) and its Spark jobs' tasks. Where a
    # phase ran jobs their tasks took CPU, and the costliest phases all ran on the driver.
    assert all(float(c[-1]) > 0 for c in columns if c[-3] != "-" and int(c[-3]) > 0), table
    assert sum(float(c[-2]) for c in columns if c[-2] != "-") > 0, table
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["cat"] for e in spans} >= {"bronze_kafka_events", "orders", "player_xp"}
    # Profiled: each micro-batch's Spark jobs are counted.
    batches = [e for e in spans if e["name"] == "foreachBatch"]
    assert batches and all("spark_jobs" in e["args"] for e in batches)
    # A job counts in the innermost span open when it started (the Delta append inside the
    # foreachBatch, say). Bronze writes every batch it reads, so each of its batches has jobs
    # (a batch of another flow may filter to nothing).
    bronze_jobs: dict[int, int] = {}
    for e in spans:
        if e["cat"] == "bronze_kafka_events" and "batch" in e["args"]:
            batch = e["args"]["batch"]
            bronze_jobs[batch] = bronze_jobs.get(batch, 0) + e["args"].get("spark_jobs", 0)
    assert bronze_jobs and all(jobs >= 1 for jobs in bronze_jobs.values()), bronze_jobs
