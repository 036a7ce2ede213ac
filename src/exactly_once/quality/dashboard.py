"""The local expectation dashboard: one static HTML file built from the event log and the tables.

Everything it shows comes from Delta tables in the warehouse, read with Spark:

* `event_log` (flow_progress rows, see local/observe/event_log.py): expectation pass/fail per
  update, duplicates dropped, stale updates ignored, late events, records dropped and quarantined;
* `quarantine`: records by rule (`explode(errors)`);
* every table: its row count;
* the pipeline graph and each dataset's flow history (graph_view.py, from the event log), and,
  when served, a search box explaining a key (explain_page.py).

Charts are inline SVG drawn here; the file needs no server and no network. When Data Docs exist
the page links to their index and to each suite's latest validation page.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from exactly_once.errors import QualityError
from exactly_once.local.inspect.delivery import shown_utc
from exactly_once.local.observe.event_log import PIPELINE_NAME
from exactly_once.local.storage.delta_log import is_delta_table
from exactly_once.local.storage.warehouse import EVENT_LOG_DIR, Warehouse
from exactly_once.quality.explain_page import search_form
from exactly_once.quality.graph_view import GraphView, collect_graph, graph_svg
from exactly_once.quality.paths import DEFAULT_DASHBOARD
from exactly_once.quality.template import DASHBOARD

COLORS = ["#1a56db", "#e3a008", "#c81e1e", "#057a55", "#7e3af2", "#0694a2", "#d61f69"]


@dataclass
class DashboardData:
    updates: list[dict]
    expectations: list[dict]  # latest update, one per (dataset, name)
    expectation_history: dict[str, list[float]]  # "dataset.name" -> failure rate per update
    quarantine: list[tuple[str, int]]
    quarantine_total: int
    tables: list[dict]
    graph: GraphView | None = None


def collect(spark: SparkSession, warehouse: Path) -> DashboardData:
    log_path = Warehouse(warehouse).event_log_path()
    if not is_delta_table(log_path):
        raise QualityError(f"no event log in {warehouse}; run the pipeline first")
    rows = (spark.read.format("delta").load(str(log_path.resolve()))
            .where("event_type = 'flow_progress'")
            .select("origin.update_id", "origin.flow_name", "origin.dataset_name", "timestamp",
                    F.col("sequence.control_plane_seq_no").alias("seq"),
                    "details.flow_progress.status", "details.flow_progress.metrics",
                    "details.flow_progress.data_quality")
            .orderBy("seq").collect())
    updates: dict[str, dict] = {}
    per_update_expect: dict[str, dict[str, tuple[int, int]]] = {}
    dropped_by_views: dict[str, dict[frozenset, int]] = {}
    for r in rows:
        u = updates.setdefault(r.update_id, {
            "update_id": r.update_id, "started": shown_utc(r.timestamp),
            "status": "COMPLETED", "duplicates": 0, "stale": 0, "late": 0, "dropped": 0,
            "quarantined": 0, "records_in": 0})
        m = r.metrics
        if r.status == "FAILED":
            u["status"] = "FAILED"
        if m is not None:
            u["duplicates"] += m.num_duplicates_dropped or 0
            u["stale"] += m.num_stale_updates_ignored or 0
            u["late"] += m.num_late_events or 0
            if r.dataset_name == "quarantine":
                u["quarantined"] += m.num_output_rows or 0
            if r.dataset_name == "bronze_kafka_events":
                u["records_in"] += m.num_output_rows or 0
        if r.data_quality is not None:
            # Every flow that reads a temporary view evaluates (and counts) the same rows, so a
            # dataset's counts are taken once per update, not summed over its readers.
            views = frozenset(e.dataset for e in r.data_quality.expectations or [])
            dropped = dropped_by_views.setdefault(r.update_id, {})
            dropped[views] = max(dropped.get(views, 0), r.data_quality.dropped_records or 0)
            for e in r.data_quality.expectations or []:
                key = f"{e.dataset}.{e.name}"
                passed, failed = per_update_expect.setdefault(r.update_id, {}).get(key, (0, 0))
                per_update_expect[r.update_id][key] = (max(passed, e.passed_records),
                                                       max(failed, e.failed_records))
    for update_id, dropped in dropped_by_views.items():
        updates[update_id]["dropped"] = sum(dropped.values())
    ordered = list(updates.values())
    keys = sorted({k for v in per_update_expect.values() for k in v})
    history: dict[str, list[float]] = {k: [] for k in keys}
    for u in ordered:
        counts = per_update_expect.get(u["update_id"], {})
        for k in keys:
            passed, failed = counts.get(k, (0, 0))
            history[k].append(failed / (passed + failed) if passed + failed else 0.0)
    latest = per_update_expect.get(ordered[-1]["update_id"], {}) if ordered else {}
    expectations = []
    for k in keys:
        passed, failed = latest.get(k, (0, 0))
        dataset, name = k.split(".", 1)
        expectations.append({"dataset": dataset, "name": name, "passed": passed,
                             "failed": failed,
                             "rate": passed / (passed + failed) if passed + failed else 1.0})

    quarantine, total = [], 0
    qpath = Warehouse(warehouse).table_path("quarantine")
    if is_delta_table(qpath):
        q = spark.read.format("delta").load(str(qpath.resolve()))
        total = q.count()
        quarantine = [(r.rule, r["count"]) for r in
                      q.select(F.explode("errors").alias("rule")).groupBy("rule").count()
                      .orderBy(F.desc("count"), "rule").collect()]
    tables = []
    for path in sorted(p for p in warehouse.iterdir() if is_delta_table(p)):
        if path == log_path:
            continue
        tables.append({"name": path.name,
                       "rows": spark.read.format("delta").load(str(path.resolve())).count()})
    graph = collect_graph(spark, log_path, [str(t["name"]) for t in tables])
    return DashboardData(ordered, expectations, history, quarantine, total, tables, graph)


# -- inline SVG charts -------------------------------------------------------------------------
def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def hbar_chart(name: str, items: list[tuple[str, int]], color: str = COLORS[0]) -> str:
    """Horizontal bars, one per (label, value)."""
    if not items:
        return f'<svg class="chart" data-chart="{name}" width="460" height="24">' \
               '<text x="0" y="16">no data</text></svg>'
    width, label_w, bar_h, gap = 460, 170, 16, 6
    top = max(v for _, v in items) or 1
    height = len(items) * (bar_h + gap)
    parts = [f'<svg class="chart" data-chart="{name}" width="{width}" height="{height}" '
             f'role="img" aria-label="{_esc(name)}">']
    for i, (label, value) in enumerate(items):
        y = i * (bar_h + gap)
        w = max(1.0, (width - label_w - 60) * value / top)
        parts.append(f'<text x="0" y="{y + 12}">{_esc(label)}</text>'
                     f'<rect class="bar" x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                     f'fill="{color}" data-label="{_esc(label)}" data-value="{value}">'
                     f'<title>{_esc(label)}: {value:,}</title></rect>'
                     f'<text x="{label_w + w + 4:.1f}" y="{y + 12}">{value:,}</text>')
    parts.append("</svg>")
    return "".join(parts)


def grouped_bar_chart(name: str, groups: list[str], series: dict[str, list[float]],
                      percent: bool = False) -> str:
    """Vertical bars: one group per x label (update), one bar per series, and a legend."""
    width, height, left, bottom = 460, 200, 40, 24
    if not groups or not series:
        return f'<svg class="chart" data-chart="{name}" width="{width}" height="24">' \
               '<text x="0" y="16">no data</text></svg>'
    top = max([v for vals in series.values() for v in vals] + [0]) or 1
    if percent:
        top = max(top, 0.01)
    plot_w, plot_h = width - left - 10, height - bottom - 10
    group_w = plot_w / len(groups)
    bar_w = max(2.0, (group_w - 8) / len(series))
    parts = [f'<svg class="chart" data-chart="{name}" width="{width}" height="{height}" '
             f'role="img" aria-label="{_esc(name)}">',
             f'<line x1="{left}" y1="{10 + plot_h}" x2="{width - 10}" y2="{10 + plot_h}" '
             'stroke="#9aa5b1"/>',
             f'<text x="0" y="16">{_fmt(top, percent)}</text>',
             f'<text x="0" y="{10 + plot_h}">0</text>']
    for g, label in enumerate(groups):
        x0 = left + g * group_w + 4
        parts.append(f'<text x="{x0:.1f}" y="{height - 6}">{_esc(label)}</text>')
        for s, (sname, values) in enumerate(series.items()):
            v = values[g]
            h = plot_h * v / top
            parts.append(f'<rect class="bar" x="{x0 + s * bar_w:.1f}" y="{10 + plot_h - h:.1f}" '
                         f'width="{bar_w - 1:.1f}" height="{max(h, 0.5):.1f}" '
                         f'fill="{COLORS[s % len(COLORS)]}" data-series="{_esc(sname)}" '
                         f'data-value="{v}"><title>{_esc(sname)} · {_esc(label)}: '
                         f'{_fmt(v, percent)}</title></rect>')
    parts.append("</svg>")
    legend = "".join(f'<span><i class="sw" style="background:{COLORS[s % len(COLORS)]}"></i>'
                     f'{_esc(n)}</span>' for s, n in enumerate(series))
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def _fmt(v: float, percent: bool) -> str:
    return f"{v * 100:.1f}%" if percent else f"{v:,.0f}"


def _data_docs_links(data_docs: Path | None, output: Path) -> dict | None:
    if data_docs is None or not (data_docs / "index.html").is_file():
        return None
    import os

    def rel(p: Path) -> str:
        return Path(os.path.relpath(p.resolve(), output.parent.resolve())).as_posix()

    suites = []
    validations = data_docs / "validations"
    if validations.is_dir():
        for suite_dir in sorted(p for p in validations.iterdir() if p.is_dir()):
            pages = sorted(suite_dir.rglob("*.html"))
            if pages:  # run directories are timestamps: the last one is the latest
                suites.append({"name": suite_dir.name, "href": rel(pages[-1])})
    return {"index": rel(data_docs / "index.html"), "suites": suites}


# Updates listed per dataset in its flow history (a continuous run makes many).
HISTORY_UPDATES = 50


def _histories(graph: GraphView | None) -> list[dict]:
    if graph is None:
        return []
    histories = []
    for name in sorted(graph.nodes):
        node = graph.nodes[name]
        shown = sorted({r.update for r in node.runs}, reverse=True)[:HISTORY_UPDATES]
        histories.append({"name": name, "status": node.status,
                          "runs": [r for r in node.runs if r.update in shown],
                          "updates": len({r.update for r in node.runs}), "shown": len(shown)})
    return histories


def render(data: DashboardData, output: Path, data_docs: Path | None = None,
           event_log: str = EVENT_LOG_DIR, refresh_seconds: int | None = None,
           search: list[str] | None = None) -> str:
    """The page; `refresh_seconds`: the browser reloads it that often (a served dashboard);
    `search`: the tables the graph view's search box offers (a served dashboard answers it)."""
    from jinja2 import Environment

    latest = data.updates[-1] if data.updates else None
    labels = [f"#{i + 1}" for i in range(len(data.updates))]
    charts = {
        "expectations": grouped_bar_chart("expectations", labels, data.expectation_history,
                                          percent=True),
        "quarantine": hbar_chart("quarantine", data.quarantine, COLORS[2]),
        "redelivery": grouped_bar_chart("redelivery", labels, {
            "duplicates dropped": [u["duplicates"] for u in data.updates],
            "stale updates ignored": [u["stale"] for u in data.updates],
            "late events": [u["late"] for u in data.updates],
        }),
        "tables": hbar_chart("tables", [(t["name"], t["rows"]) for t in data.tables],
                             COLORS[3]),
    }
    kpis = []
    if latest:
        kpis = [{"key": k, "label": label, "value": latest[k]} for k, label in [
            ("records_in", "records in"), ("quarantined", "quarantined"),
            ("dropped", "dropped by expectations"), ("duplicates", "duplicates dropped"),
            ("stale", "stale updates ignored"), ("late", "late events")]]
    env = Environment(autoescape=True)
    from markupsafe import Markup

    return env.from_string(DASHBOARD).render(
        pipeline=PIPELINE_NAME, built_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        event_log=event_log, updates=data.updates, latest=latest, kpis=kpis,
        expectations=data.expectations, quarantine_total=data.quarantine_total,
        tables=data.tables, charts={k: Markup(v) for k, v in charts.items()},
        data_docs=_data_docs_links(data_docs, output), refresh_seconds=refresh_seconds,
        graph=Markup(graph_svg(data.graph)) if data.graph else None,
        latest_update=data.graph.latest_update if data.graph else 0,
        histories=_histories(data.graph),
        search=search_form(search) if search else None)


def build_dashboard(spark: SparkSession, warehouse: Path, output: Path = DEFAULT_DASHBOARD,
                    data_docs: Path | None = None, refresh_seconds: int | None = None,
                    search: list[str] | None = None) -> DashboardData:
    data = collect(spark, warehouse)
    output.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed: a browser (or the server) never reads half a page.
    partial = output.with_name(f".{output.name}.tmp")
    partial.write_text(render(data, output, data_docs, str(Warehouse(warehouse).event_log_path()),
                              refresh_seconds, search))
    partial.replace(output)
    return data
