"""The local expectation dashboard, rendered by headless Chromium: charts there, numbers right."""

from __future__ import annotations

import re
import shutil
import threading
import urllib.request

import pytest
from browser import chromium
from pyspark.sql import functions as F

from exactly_once.local.observe import event_log
from exactly_once.local.observe.progress import FlowResult
from exactly_once.local.observe.timeline import WAIT_FOR_UPSTREAM, Span, Timeline
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.quality.dashboard import build_dashboard
from exactly_once.quality.graph_view import STATUS_COLORS, collect_graph, graph_svg
from exactly_once.quality.serve import LivePage, dashboard_server


@pytest.fixture(scope="module")
def dashboard(spark, quality_run, validated, tmp_path_factory):
    _, data_docs = validated
    out = tmp_path_factory.mktemp("dashboard") / "dashboard.html"
    data = build_dashboard(spark, quality_run.warehouse, out, data_docs=data_docs)
    return out, data


def _attr(dom: str, name: str) -> list[str]:
    return re.findall(rf'{name}="([^"]*)"', dom)


def test_dashboard_renders_charts_and_numbers_match_the_tables(spark, quality_run, dashboard,
                                                               tmp_path):
    out, _ = dashboard
    dom = chromium("--dump-dom", out.as_uri(), profile=tmp_path / "profile")
    # The inline script ran: four charts, with bars drawn.
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-charts="4"' in body
    assert int(re.search(r'data-bars="(\d+)"', body).group(1)) > 10
    for chart in ("expectations", "quarantine", "redelivery", "tables"):
        assert f'data-chart="{chart}"' in dom

    wh = quality_run.warehouse
    quarantine = spark.read.format("delta").load(str(wh / "quarantine"))
    assert _attr(dom, "data-quarantine-total") == [str(quarantine.count())]
    by_rule = {r.rule: r["count"] for r in quarantine.select(F.explode("errors").alias("rule"))
               .groupBy("rule").count().collect()}
    bars = dict(re.findall(r'data-label="([^"]+)" data-value="(\d+)"', dom))
    for rule, count in by_rule.items():
        assert bars[rule] == str(count)
    for table, rows in quality_run.result.table_rows.items():
        assert re.search(rf'data-table="{table}">.*?data-rows="{rows}"', dom, re.S), table

    log = spark.read.format("delta").load(str(Warehouse(wh).event_log_path()))
    expected = {(r.dataset, r.name): (r.passed, r.failed) for r in
                log.select(F.explode("details.flow_progress.data_quality.expectations")
                           .alias("e")).groupBy("e.dataset", "e.name")
                # each reader of a view counts the same rows: once per dataset, not summed
                .agg(F.max("e.passed_records").alias("passed"),
                     F.max("e.failed_records").alias("failed")).collect()}
    for (dataset, name), (passed, failed) in expected.items():
        row = re.search(rf'data-expectation="{dataset}.{name}">.*?data-passed="(\d+)".*?'
                        rf'data-failed="(\d+)"', dom, re.S)
        assert row and (int(row.group(1)), int(row.group(2))) == (passed, failed), name
    result = quality_run.result
    assert _attr(dom, "data-duplicates") == [str(result.total("duplicates_dropped"))]
    assert _attr(dom, "data-stale") == [str(result.total("cdc_stale"))]
    assert f'data-kpi="quarantined">{quarantine.count():,}<' in dom
    # Dropped by expectations: the well-formed records that broke a rule, each counted once
    # (quarantine holds them all; the malformed ones never reached the rules).
    broke_a_rule = quarantine.where(~F.exists("errors", lambda e: (e == "malformed_json")
                                              | e.startswith("invalid_"))).count()
    assert f'data-kpi="dropped">{broke_a_rule:,}<' in dom
    # Links into the Data Docs, relative, to pages that exist.
    for href in re.findall(r'href="([^"]+)"', dom):
        assert (out.parent / href).resolve().is_file(), href
    assert 'id="data-docs"' in dom and dom.count('class="suite-link"') == 4


def test_dashboard_screenshot(dashboard, tmp_path):
    out, _ = dashboard
    png = tmp_path / "dashboard.png"
    chromium(f"--screenshot={png}", "--window-size=1280,1400", "--hide-scrollbars",
             out.as_uri(), profile=tmp_path / "profile")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


# -- the pipeline graph ---------------------------------------------------------------------------
def _nodes(dom: str) -> dict[str, dict[str, str]]:
    """Each graph node's data-* attributes, by dataset."""
    nodes = {}
    for tag in re.findall(r'<g class="node[^"]*"[^>]*>', dom):
        attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag))
        nodes[attrs["node"]] = attrs
    return nodes


def _own_seconds(result, target: str) -> float:
    """A dataset's busy seconds by the update's own timeline: its flows' own time, no waits."""
    flows = {f.flow for f in result.flows if f.target == target}
    return sum(own for span, own in zip(result.timeline.spans, result.timeline.self_seconds(),
                                        strict=True)
               if span.flow in flows and span.phase != WAIT_FOR_UPSTREAM)


def test_the_graph_has_a_node_per_dataset_with_the_latest_update_s_numbers(quality_run,
                                                                         dashboard, tmp_path):
    out, _ = dashboard
    # Opened at a node's history, as a click on the node opens it.
    dom = chromium("--dump-dom", out.as_uri() + "#history-orders", profile=tmp_path / "profile")
    nodes = _nodes(dom)
    result = quality_run.result
    assert set(nodes) == set(result.table_rows)
    assert f'data-nodes="{len(nodes)}"' in re.search(r"<body[^>]*>", dom).group(0)
    for name, node in nodes.items():
        assert node["status"] == "COMPLETED", name
        assert int(node["rows-written"]) == result.flow_output(name), name
        assert float(node["seconds"]) == pytest.approx(_own_seconds(result, name), abs=0.01), name
    # Expectation checks passed / evaluated, over the dataset's flows.
    for name in ("silver_orders", "silver_player_rewards", "quarantine"):
        metrics = [m for f in result.flows if f.target == name for m in f.expectations]
        passed = sum(m.passed_records for m in metrics)
        failed = sum(m.failed_records for m in metrics)
        assert failed > 0 or name == "quarantine"
        assert float(nodes[name]["pass-rate"]) == pytest.approx(passed / (passed + failed)), name
    assert nodes["orders"]["pass-rate"] == "" and "no expectations" in dom
    # Quarantined: what the quarantine took from each parsed topic, and in all.
    taken = {f.flow: f.output_rows for f in result.flows if f.target == "quarantine"}
    assert int(nodes["parsed_orders"]["quarantined"]) == taken["quarantine_orders"] > 0
    assert int(nodes["parsed_player_rewards"]["quarantined"]) == \
        taken["quarantine_player_rewards"] > 0
    assert int(nodes["quarantine"]["quarantined"]) == result.flow_output("quarantine")
    assert nodes["silver_orders"]["quarantined"] == ""
    # Left to right by what each dataset reads: bronze, parsed, silver and quarantine, gold.
    edges = set(re.findall(r'data-edge="([^"]+)-&gt;([^"]+)"', dom))
    assert {("bronze_kafka_events", "parsed_orders"), ("parsed_orders", "silver_orders"),
            ("parsed_orders", "quarantine"), ("parsed_player_rewards", "quarantine"),
            ("silver_orders", "orders"), ("silver_orders", "orders_history"),
            ("silver_player_rewards", "player_xp_ledger"),
            ("player_xp_ledger", "player_xp")} <= edges
    level = {name: int(node["level"]) for name, node in nodes.items()}
    assert all(level[a] < level[b] for a, b in edges)
    assert (level["bronze_kafka_events"], level["parsed_orders"], level["silver_orders"],
            level["orders"]) == (0, 1, 2, 3)
    # The opened history: the orders flow of this update, with its micro-batches.
    assert 'data-open="orders"' in re.search(r"<body[^>]*>", dom).group(0)
    section = re.search(r'<section class="history" id="history-orders".*?</section>', dom, re.S)
    flow = next(f for f in result.flows if f.target == "orders")
    run = re.search(r'data-run="1" data-flow="orders">.*?data-batches="(\d+)".*?'
                    r'data-rows-in="(\d+)".*?data-rows-written="(\d+)"', section.group(0), re.S)
    assert run and tuple(map(int, run.groups())) == (flow.batches, flow.input_rows,
                                                     flow.output_rows)


def test_node_colors_follow_the_latest_update(spark, tmp_path):
    """A failed flow is red, a dataset the latest update did not run (or never ran) grey."""
    wh = Warehouse(tmp_path / "warehouse")

    def timeline(*reads: tuple[str, str]) -> Timeline:
        t = Timeline()
        for flow, upstream in reads:
            t.add(Span(flow, WAIT_FOR_UPSTREAM, 0.0, 0.5, detail=upstream))
            t.add(Span(flow, "flow", 0.5, 2.0))
        return t

    event_log.append(spark, wh, [FlowResult("a", "a", "append", output_rows=5),
                                 FlowResult("b", "b", "append", output_rows=3)],
                     "u1", timeline(("b", "a")))
    event_log.append(spark, wh, [FlowResult("a", "a", "append", status="FAILED",
                                            error="flow `a` failed: boom")], "u2", timeline())
    view = collect_graph(spark, wh.event_log_path(), tables=["c"])
    assert {n: view.nodes[n].status for n in "abc"} == \
        {"a": "FAILED", "b": "SKIPPED", "c": "SKIPPED"}
    assert view.edges == [("a", "b")] and (view.nodes["a"].level, view.nodes["b"].level) == (0, 1)
    nodes = _nodes(graph_svg(view))
    assert nodes["b"]["rows-written"] == "" and nodes["c"]["seconds"] == ""
    svg = graph_svg(view)
    for name, color in [("a", STATUS_COLORS["FAILED"][0]), ("b", STATUS_COLORS["SKIPPED"][0]),
                        ("c", STATUS_COLORS["SKIPPED"][0])]:
        node = re.search(rf'<g class="node" data-node="{name}".*?</g>', svg).group(0)
        assert f'stroke="{color}"' in node, name
    assert "last ran in update #1" in svg and "never ran" in svg
    assert view.nodes["b"].runs[0].seconds == pytest.approx(2.0)  # the wait is not its time


def test_a_dataset_whose_flows_all_had_nothing_new_is_grey(spark, tmp_path):
    """A dataset whose flows were all SKIPPED in the latest update (nothing new to read or
    recompute: execution/unread.py, unchanged.py) is grey; one of its flows that ran makes it
    green."""
    wh = Warehouse(tmp_path / "warehouse")
    event_log.append(spark, wh, [FlowResult("a", "t", "append", output_rows=5),
                                 FlowResult("b", "t", "append", output_rows=1),
                                 FlowResult("v", "v", "materialized_view", output_rows=2)], "u1")
    event_log.append(spark, wh, [FlowResult("a", "t", "append", status="SKIPPED"),
                                 FlowResult("b", "t", "append", output_rows=1),
                                 FlowResult("v", "v", "materialized_view", status="SKIPPED")],
                     "u2")
    view = collect_graph(spark, wh.event_log_path(), tables=[])
    assert {n: view.nodes[n].status for n in ("t", "v")} == {"t": "COMPLETED", "v": "SKIPPED"}


def test_the_served_dashboard_reloads_itself_and_shows_each_new_update(spark, quality_run,
                                                                       tmp_path):
    """`quality dashboard --serve`: the page asks to be reloaded, and a request after the event
    log's next commit (one per update) gets a page with that update."""
    warehouse = tmp_path / "warehouse"
    shutil.copytree(quality_run.warehouse, warehouse)
    out = tmp_path / "site" / "dashboard.html"
    page = LivePage(out, Warehouse(warehouse).event_log_path(), lambda: build_dashboard(
        spark, warehouse, out, refresh_seconds=3))
    page.build()
    server = dashboard_server(page, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/"
    try:
        first = urllib.request.urlopen(url, timeout=60).read().decode()
        assert '<meta http-equiv="refresh" content="3">' in first
        assert "Pipeline graph · update #1<" in first and 'data-node="orders"' in first
        event_log.append(spark, Warehouse(warehouse), [FlowResult(
            "orders", "orders", "auto_cdc", status="FAILED", error="flow `orders` failed")],
            "next-update")
        second = urllib.request.urlopen(url, timeout=120).read().decode()
        assert "Pipeline graph · update #2<" in second
        assert re.search(r'data-node="orders" data-status="FAILED"', second)
        assert re.search(r'data-node="silver_orders" data-status="SKIPPED"', second)
    finally:
        server.shutdown()
        server.server_close()
