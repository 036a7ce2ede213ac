"""The dataflow graph as a person reads it: datasets with their kind, flows with their kind and
what they read; printed as text, Mermaid, Graphviz dot or JSON.

Built by `dry_run.analyze` (which learns what each flow reads by building its query against
empty inputs); rendering is pure Python.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from pyspark.pipelines.output import MaterializedView, Output, Sink, StreamingTable, TemporaryView

from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.graph.dataset_declarations import PublishedView

STREAMING_TABLE, MATERIALIZED_VIEW = "streaming table", "materialized view"
TEMPORARY_VIEW, VIEW, SINK = "temporary view", "view", "sink"
APPEND = "append"
FORMATS = ("text", "mermaid", "dot", "json")


def dataset_kind(output: Output) -> str:
    if isinstance(output, StreamingTable):
        return STREAMING_TABLE
    if isinstance(output, MaterializedView):
        return MATERIALIZED_VIEW
    if isinstance(output, PublishedView):
        return VIEW
    if isinstance(output, TemporaryView):
        return TEMPORARY_VIEW
    if isinstance(output, Sink):
        return SINK
    return VIEW


def auto_cdc_kind(spec: AutoCdcSpec) -> str:
    return f"AUTO CDC SCD{spec.stored_as_scd_type}"


@dataclass(frozen=True)
class Read:
    dataset: str
    streaming: bool


@dataclass(frozen=True)
class DatasetNode:
    name: str
    kind: str
    file: str


@dataclass(frozen=True)
class FlowNode:
    name: str
    target: str
    # append | AUTO CDC SCD1/2 | AUTO CDC FROM SNAPSHOT SCD1/2 | materialized view; "... once"
    # for a once flow
    kind: str
    reads: tuple[Read, ...]
    file: str
    source: str = ""  # a source outside the pipeline it names: a snapshot flow's function
    comment: str = ""  # its description (`append_flow(comment=...)`)


@dataclass
class Dataflow:
    datasets: list[DatasetNode] = field(default_factory=list)
    flows: list[FlowNode] = field(default_factory=list)

    def downstream(self, names: Iterable[str]) -> list[str]:
        """`names` and every dataset that reads one of them, directly, through a view or
        further down, in the graph's order."""
        reached = set(names)
        grew = True
        while grew:
            grew = False
            for flow in self.flows:
                if flow.target not in reached and any(r.dataset in reached for r in flow.reads):
                    reached.add(flow.target)
                    grew = True
        return [d.name for d in self.datasets if d.name in reached]

    def upstream_first(self, names: Iterable[str]) -> list[str]:
        """`names` ordered by how far each is from the pipeline's sources (what a dataset
        reads before it), ties in the graph's order."""
        reads: dict[str, set[str]] = {f.target: set() for f in self.flows}
        for flow in self.flows:
            reads[flow.target].update(r.dataset for r in flow.reads)
        depth: dict[str, int] = {}

        def depth_of(name: str, seen: frozenset[str] = frozenset()) -> int:
            if name not in depth:
                above = [depth_of(r, seen | {name}) for r in reads.get(name, ())
                         if r in reads and r not in seen]
                depth[name] = 1 + max(above, default=-1)
            return depth[name]

        order = [d.name for d in self.datasets]
        wanted = list(dict.fromkeys(names))
        return sorted(wanted, key=lambda n: (depth_of(n), order.index(n) if n in order else 0))

    def sources(self) -> list[str]:
        """The datasets whose flows read no dataset of the pipeline: where data enters it (a
        Kafka source, export files)."""
        names = {d.name for d in self.datasets}
        fed = {f.target for f in self.flows if any(r.dataset in names for r in f.reads)}
        return [d.name for d in self.datasets if d.name not in fed]

    def render(self, form: str) -> str:
        return {"text": self.text, "mermaid": self.mermaid, "dot": self.dot,
                "json": self.json}[form]()

    def text(self) -> str:
        """Each dataset, then the flows into it with what they read."""
        lines = []
        for d in self.datasets:
            lines.append(f"{d.kind:<18} {d.name}  ({d.file})")
            for f in self.flows:
                if f.target == d.name:
                    lines.append(f"  {'flow ' + f.name:<30} {f.kind:<18} reads {_reads(f)}")
        return "\n".join(lines)

    def mermaid(self) -> str:
        """A flowchart: datasets as nodes shaped by kind, flows as edges labelled by kind
        (a dashed edge is a batch read)."""
        shapes = {STREAMING_TABLE: ("[", "]"), MATERIALIZED_VIEW: ("[[", "]]"),
                  TEMPORARY_VIEW: ("([", "])"), VIEW: ("([", "])"), SINK: ("[/", "/]")}
        lines = ["flowchart LR"]
        for d in self.datasets:
            left, right = shapes[d.kind]
            lines.append(f'  {d.name}{left}"{d.name}<br/><i>{d.kind}</i>"{right}')
        for f in self.flows:
            label = f.kind if f.name == f.target else f"{f.name}: {f.kind}"
            for r in f.reads:
                arrow = "-->" if r.streaming else "-.->"
                lines.append(f"  {r.dataset} {arrow}|{label}| {f.target}")
            if not f.reads:
                source = f'("{f.source}")' if f.source else "(source)"
                lines.append(f"  {f.name}_source({source}) -->|{label}| {f.target}")
        return "\n".join(lines)

    def dot(self) -> str:
        shapes = {STREAMING_TABLE: "box", MATERIALIZED_VIEW: "box3d", TEMPORARY_VIEW: "ellipse",
                  VIEW: "ellipse", SINK: "cds"}
        lines = ["digraph pipeline {", "  rankdir=LR;"]
        for d in self.datasets:
            lines.append(f'  "{d.name}" [shape={shapes[d.kind]}, '
                         f'label="{d.name}\\n{d.kind}"];')
        for f in self.flows:
            for r in f.reads:
                style = "" if r.streaming else ", style=dashed"
                lines.append(f'  "{r.dataset}" -> "{f.target}" [label="{f.name}: {f.kind}"'
                             f'{style}];')
        lines.append("}")
        return "\n".join(lines)

    def json(self) -> str:
        return json.dumps({"datasets": [asdict(d) for d in self.datasets],
                           "flows": [asdict(f) for f in self.flows]}, indent=2)


def _reads(flow: FlowNode) -> str:
    if not flow.reads:
        return f"snapshots of {flow.source}" if flow.source else "(a source outside the pipeline)"
    return ", ".join(r.dataset + ("" if r.streaming else " (batch)") for r in flow.reads)
