"""The pipeline as a graph, as Databricks' pipeline UI draws it: one node per dataset, read from
the event log alone.

* Nodes and edges: every dataset a `flow_progress` row names is a node; its inputs are the
  tables its flows waited for (`wait for upstream` spans of the event log's `flow_timeline`
  rows, event_log.py), which is what the queries read (update.py). A temporary view is inlined
  into its readers, so `checked_orders` is part of `silver_orders`' node, as its expectations are.
* Status: the node's status in the latest update, as Databricks shows the graph of one update:
  FAILED if a flow into it failed, COMPLETED if one of its flows ran, else SKIPPED (its flows
  had nothing new to read or recompute, were not selected by `--refresh`, were stopped by an
  upstream failure, or never ran).
* On each node, for the latest update: rows written (`num_output_rows`), busy seconds from the
  timeline (its flows' own time, waits for upstream left out), the expectation pass rate (checks
  passed / checks evaluated, over its expectations) and the records its input sent to quarantine
  (`quarantine` flows that read it; for `quarantine` itself, the rows it took).
* Layout: columns by dependency level (a dataset is one column right of its deepest input), so
  bronze -> silver -> gold reads left to right; within a column, nodes sit near their inputs.

Each node's history (every update its flows ran in: status, micro-batches, seconds, rows) is a
section of the page that a click on the node opens (dashboard template).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from exactly_once.local.inspect.delivery import shown_utc
from exactly_once.local.observe.timeline import WAIT_FOR_UPSTREAM
from exactly_once.local.storage.files import StoragePath

QUARANTINE = "quarantine"
STATUS_COLORS = {"COMPLETED": ("#057a55", "#def7ec"), "FAILED": ("#c81e1e", "#fde8e8"),
                 "SKIPPED": ("#7b8794", "#eef0f2")}
NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 190, 84, 44, 18, 12


@dataclass
class FlowRun:
    """One flow in one update."""

    update: int  # 1-based place of the update in the event log
    update_id: str
    started: str
    flow: str
    status: str
    batches: int
    rows_in: int
    rows_written: int
    seconds: float | None  # busy seconds from the timeline; None: no timeline rows
    passed: int | None  # expectation checks; None: the flow has no expectations
    failed: int | None
    dropped: int | None
    inputs: list[str] = field(default_factory=list)
    micro_batches: list[tuple[int, int, float]] = field(default_factory=list)  # id, rows, s
    error: str | None = None


@dataclass
class Node:
    name: str
    runs: list[FlowRun]  # every run of a flow into it, newest update first
    status: str = "SKIPPED"
    level: int = 0
    x: float = 0.0
    y: float = 0.0
    quarantined: int | None = None

    def latest_runs(self, update: int) -> list[FlowRun]:
        return [r for r in self.runs if r.update == update]

    @property
    def inputs(self) -> list[str]:
        """The tables its flows read in the last update they ran."""
        if not self.runs:
            return []
        last = self.runs[0].update
        return sorted({i for r in self.runs if r.update == last for i in r.inputs})


@dataclass
class GraphView:
    nodes: dict[str, Node]
    latest_update: int  # 0: no update yet

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(i, n.name) for n in self.nodes.values() for i in n.inputs if i in self.nodes]

    def node_metrics(self, name: str) -> dict:
        """What the node shows: the latest update's numbers, when it ran in it."""
        runs = self.nodes[name].latest_runs(self.latest_update)
        seconds = [r.seconds for r in runs if r.seconds is not None]
        checks = [(r.passed or 0, r.failed or 0) for r in runs if r.passed is not None]
        passed, failed = sum(p for p, _ in checks), sum(f for _, f in checks)
        return {
            "ran": bool(runs),
            "has_expectations": bool(checks),
            "rows_written": sum(r.rows_written for r in runs),
            "seconds": round(sum(seconds), 3) if seconds else None,
            "pass_rate": passed / (passed + failed) if passed + failed else None,
            "failed_checks": failed,
            "quarantined": self.nodes[name].quarantined,
        }


# -- from the event log --------------------------------------------------------------------------
def _sum_field(column: str, name: str):
    return F.aggregate(column, F.lit(0).cast("bigint"),
                       lambda acc, e: acc + F.coalesce(e[name], F.lit(0).cast("bigint")))


def _timeline(log: DataFrame) -> dict[tuple[str, str], tuple]:
    """(update_id, flow) -> (busy seconds, tables waited for, micro-batches)."""
    details = log.schema["details"].dataType  # an event log from before the timeline has none
    if not isinstance(details, StructType) or "flow_timeline" not in details.fieldNames():
        return {}
    spans = (log.where("event_type = 'flow_timeline' AND origin.flow_name IS NOT NULL")
             .select("origin.update_id", "origin.flow_name",
                     F.explode("details.flow_timeline.spans").alias("s")))
    wait = F.col("s.phase") == WAIT_FOR_UPSTREAM
    rows = spans.groupBy("update_id", "flow_name").agg(
        F.sum(F.when(~wait, F.col("s.self_seconds"))).alias("busy"),
        F.collect_set(F.when(wait, F.col("s.detail"))).alias("inputs"),
        F.collect_list(F.when(F.col("s.phase") == "micro-batch", F.struct(
            "s.batch_id", "s.detail", "s.duration_seconds"))).alias("batches")).collect()
    return {(r.update_id, r.flow_name): (
        r.busy, sorted(r.inputs),
        sorted((b.batch_id, _rows_in(b.detail), round(b.duration_seconds, 3))
               for b in r.batches)) for r in rows}


def _rows_in(detail: str | None) -> int:
    """A micro-batch span's detail is `<n> rows in` (timeline.add_progress)."""
    try:
        return int((detail or "0").split()[0])
    except ValueError:
        return 0


def collect_graph(spark: SparkSession, log_path: StoragePath,
                  tables: Sequence[str] = ()) -> GraphView:
    """The graph of the event log at `log_path`; `tables` adds datasets it never names (grey)."""
    log = spark.read.format("delta").load(str(log_path.resolve()))
    expectations = "details.flow_progress.data_quality.expectations"
    progress = (log.where("event_type = 'flow_progress'")
                .select("origin.update_id", "origin.flow_name", "origin.dataset_name",
                        F.col("sequence.control_plane_seq_no").alias("seq"), "timestamp",
                        F.col("details.flow_progress.status").alias("status"),
                        "details.flow_progress.metrics",
                        F.col("details.flow_progress.data_quality.dropped_records")
                        .alias("dropped"),
                        _sum_field(expectations, "passed_records").alias("passed"),
                        _sum_field(expectations, "failed_records").alias("failed"),
                        F.col("error.message").alias("error"))
                .orderBy("seq").collect())
    timeline = _timeline(log)
    order: dict[str, tuple[int, str]] = {}
    nodes: dict[str, Node] = {name: Node(name, []) for name in tables}
    for r in progress:
        if r.update_id not in order:
            order[r.update_id] = (len(order) + 1, shown_utc(r.timestamp))
        number, started = order[r.update_id]
        busy, inputs, batches = timeline.get((r.update_id, r.flow_name), (None, [], []))
        m = r.metrics
        run = FlowRun(number, r.update_id, started, r.flow_name, r.status or "COMPLETED",
                      (m.num_batches or 0) if m else 0, (m.num_input_rows or 0) if m else 0,
                      (m.num_output_rows or 0) if m else 0,
                      None if busy is None else round(busy, 3), r.passed, r.failed, r.dropped,
                      inputs, batches, r.error)
        nodes.setdefault(r.dataset_name, Node(r.dataset_name, [])).runs.insert(0, run)
    view = GraphView(nodes, len(order))
    for node in nodes.values():
        latest = node.latest_runs(view.latest_update)
        if any(r.status == "FAILED" for r in latest):
            node.status = "FAILED"
        elif any(r.status != "SKIPPED" for r in latest):
            node.status = "COMPLETED"
    _quarantined(view)
    _layout(view)
    return view


def _quarantined(view: GraphView) -> None:
    """Per dataset, the rows the quarantine's flows that read it took in the latest update."""
    quarantine = view.nodes.get(QUARANTINE)
    if quarantine is None:
        return
    runs = quarantine.latest_runs(view.latest_update)
    if runs:
        quarantine.quarantined = sum(r.rows_written for r in runs)
    for run in runs:
        for name in run.inputs:
            if name in view.nodes:
                node = view.nodes[name]
                node.quarantined = (node.quarantined or 0) + run.rows_written


# -- layout -------------------------------------------------------------------------------------
def _levels(view: GraphView) -> None:
    done: dict[str, int] = {}

    def level(name: str, path: frozenset[str]) -> int:
        if name not in done:
            inputs = [i for i in view.nodes[name].inputs if i in view.nodes and i not in path]
            done[name] = 1 + max((level(i, path | {name}) for i in inputs), default=-1)
        return done[name]

    for name, node in view.nodes.items():
        node.level = level(name, frozenset())


def _layout(view: GraphView) -> None:
    """Columns by level; in a column, by the mean row of the node's inputs (fewer crossings)."""
    _levels(view)
    columns: dict[int, list[Node]] = {}
    for node in view.nodes.values():
        columns.setdefault(node.level, []).append(node)
    row: dict[str, float] = {}
    tallest = max((len(c) for c in columns.values()), default=0)
    for level in sorted(columns):
        def key(node: Node) -> tuple[float, str]:
            placed = [row[i] for i in node.inputs if i in row]
            return (sum(placed) / len(placed) if placed else 0.0, node.name)

        column = sorted(columns[level], key=key)
        offset = (tallest - len(column)) / 2
        for i, node in enumerate(column):
            row[node.name] = i + offset
            node.x = PAD + level * (NODE_W + GAP_X)
            node.y = PAD + (i + offset) * (NODE_H + GAP_Y)


# -- inline SVG ----------------------------------------------------------------------------------
def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _edge(a: Node, b: Node) -> str:
    x1, y1 = a.x + NODE_W, a.y + NODE_H / 2
    x2, y2 = b.x - 6, b.y + NODE_H / 2
    bend = max((x2 - x1) / 2, 20)
    return (f'<path class="edge" data-edge="{_esc(a.name)}->{_esc(b.name)}" '
            f'd="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} '
            f'{x2:.1f},{y2:.1f}" fill="none" stroke="#9aa5b1" stroke-width="1.5" '
            'marker-end="url(#arrow)"/>')


def _node(view: GraphView, node: Node) -> str:
    m = view.node_metrics(node.name)
    stroke, fill = STATUS_COLORS[node.status]
    x, y = node.x, node.y
    if m["ran"]:
        seconds = "-" if m["seconds"] is None else f"{m['seconds']:.1f} s"
        line2 = f"{m['rows_written']:,} rows written · {seconds}"
    else:
        last = node.runs[0].update if node.runs else None
        line2 = f"skipped · last ran in update #{last}" if last else "never ran"
    rate = m["pass_rate"]
    line3 = (f"expectations {rate * 100:.1f}% passed" if rate is not None
             else "expectations: no records" if m["has_expectations"] else "no expectations")
    line4 = "" if m["quarantined"] is None else f"quarantined {m['quarantined']:,}"
    attrs = {"data-node": node.name, "data-status": node.status, "data-level": node.level,
             "data-rows-written": m["rows_written"] if m["ran"] else "",
             "data-seconds": "" if m["seconds"] is None else m["seconds"],
             "data-pass-rate": "" if rate is None else f"{rate:.6f}",
             "data-quarantined": "" if m["quarantined"] is None else m["quarantined"]}
    attr = " ".join(f'{k}="{_esc(v)}"' for k, v in attrs.items())
    return (f'<g class="node" {attr} tabindex="0" role="button" '
            f'aria-label="{_esc(node.name)}: {node.status}, open its history">'
            f'<title>{_esc(node.name)}: {node.status} (click for its flow history)</title>'
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="8" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.5"/>'
            f'<rect x="{x}" y="{y}" width="6" height="{NODE_H}" rx="3" fill="{stroke}"/>'
            f'<text class="name" x="{x + 14}" y="{y + 18}">{_esc(node.name)}</text>'
            f'<text x="{x + 14}" y="{y + 39}">{_esc(line2)}</text>'
            f'<text x="{x + 14}" y="{y + 57}">{_esc(line3)}</text>'
            f'<text x="{x + 14}" y="{y + 75}">{_esc(line4)}</text>'
            # Bottom right, where no line of text reaches: a long name would run into it above.
            f'<text class="status" x="{x + NODE_W - 8}" y="{y + 75}" text-anchor="end" '
            f'fill="{stroke}">{node.status}</text></g>')


def graph_svg(view: GraphView) -> str:
    """The graph as one inline SVG (no script, no network): nodes, edges, an arrowhead."""
    if not view.nodes:
        return '<svg class="graph" width="460" height="24"><text x="0" y="16">' \
               'no update yet</text></svg>'
    width = PAD * 2 + (max(n.level for n in view.nodes.values()) + 1) * (NODE_W + GAP_X) - GAP_X
    height = PAD * 2 + max(n.y for n in view.nodes.values()) - PAD + NODE_H
    parts = [f'<svg class="graph" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
             f'height="{height:.0f}" role="img" aria-label="pipeline graph">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
             'fill="#9aa5b1"/></marker></defs>']
    parts += [_edge(view.nodes[a], view.nodes[b]) for a, b in view.edges]
    parts += [_node(view, n) for n in sorted(view.nodes.values(), key=lambda n: (n.x, n.y))]
    parts.append("</svg>")
    return "".join(parts)
