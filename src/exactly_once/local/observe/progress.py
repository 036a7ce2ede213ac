"""What a person sees while an update runs, and the metrics each flow reports."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

from exactly_once.local.auto_cdc.from_snapshot.versions import AppliedSnapshot, shown
from exactly_once.local.graph.expectations import ExpectationMetric
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage.schema_evolution import SchemaChange


@dataclass
class FlowResult:
    flow: str
    target: str
    kind: str  # append | materialized_view | auto_cdc | auto_cdc_from_snapshot
    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    duplicates_dropped: int = 0  # redeliveries dropped by watermark dedup
    late_rows_dropped: int = 0  # rows older than the watermark, dropped by Spark
    cdc_rejected: int = 0
    cdc_stale: int = 0  # AUTO CDC events older than the stored state
    seconds: float = 0.0
    # or FAILED; SKIPPED: a materialized view whose inputs did not change (execution/unchanged.py)
    status: str = "COMPLETED"
    error: str | None = None
    # Expectations (local/graph/expectations.py): summed streaming `observedMetrics`, then per rule.
    observed: dict[str, dict[str, int]] = field(default_factory=dict)
    expectations: list[ExpectationMetric] = field(default_factory=list)
    dropped_records: int | None = None  # None: the flow has no expectations
    # AUTO CDC FROM SNAPSHOT: each snapshot applied, with the keys it inserted, updated, deleted.
    snapshots: list[AppliedSnapshot] = field(default_factory=list)
    # What the flow changed in its tables' schemas before writing (storage/schema_evolution.py).
    schema_changes: list[SchemaChange] = field(default_factory=list)

    def add_streaming_progress(self, progress: dict) -> None:
        for name, values in (progress.get("observedMetrics") or {}).items():
            sums = self.observed.setdefault(name, {})
            for key, value in values.items():
                sums[key] = sums.get(key, 0) + int(value or 0)
        if not progress.get("numInputRows") and not progress.get("stateOperators"):
            return
        self.batches += 1
        self.input_rows += progress.get("numInputRows", 0)
        for op in progress.get("stateOperators", []):
            self.duplicates_dropped += (op.get("customMetrics") or {}).get(
                "numDroppedDuplicateRows", 0)
            self.late_rows_dropped += op.get("numRowsDroppedByWatermark", 0)


@dataclass
class UpdateResult:
    update_id: str = ""
    flows: list[FlowResult] = field(default_factory=list)
    table_rows: dict[str, int] = field(default_factory=dict)
    reset: list[str] = field(default_factory=list)  # tables reset and recomputed from scratch
    seconds: float = 0.0
    timeline: Timeline = field(default_factory=Timeline)

    def total(self, metric: str, kind: str | None = None) -> int:
        return sum(getattr(f, metric) for f in self.flows if kind is None or f.kind == kind)

    def flow_input(self, target: str) -> int:
        return sum(f.input_rows for f in self.flows if f.target == target)

    def flow_output(self, target: str) -> int:
        return sum(f.output_rows for f in self.flows if f.target == target)


class Progress:
    """Prints one line per micro-batch while a flow runs and a summary at the end."""

    def __init__(self, out: TextIO | None = None, quiet: bool = False):
        self.out, self.quiet = out, quiet  # None: sys.stderr when a line is printed

    def _print(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.out or sys.stderr, flush=True)

    def flow_started(self, flow: str, kind: str) -> None:
        self._print(f"▶ {flow} ({kind.replace('_', ' ')})")

    def batch(self, flow: str, batch_id: int, rows: int) -> None:
        self._print(f"    {flow} batch {batch_id}: {rows:,} rows")

    def schema_changed(self, flow: str, table: str, changes: list[SchemaChange]) -> None:
        for change in changes:
            self._print(f"    {flow} schema of {table}: {change.described()}")

    def snapshot(self, flow: str, applied: AppliedSnapshot) -> None:
        self._print(f"    {flow} snapshot {shown(applied.version)}: {applied.rows:,} rows, "
                    f"{applied.inserted:,} inserted, {applied.updated:,} updated, "
                    f"{applied.deleted:,} deleted")

    def flow_finished(self, result: FlowResult) -> None:
        if result.status == "SKIPPED":
            self._print(f"- {result.flow}: skipped, nothing it reads changed")
            return
        extra = ""
        if result.duplicates_dropped:
            extra += f", {result.duplicates_dropped:,} duplicates dropped"
        if result.cdc_stale:
            extra += f", {result.cdc_stale:,} stale changes ignored"
        # A materialized view's refresh is a batch query, whose reads nothing counts.
        read = "" if result.kind == "materialized_view" else f"{result.input_rows:,} rows in, "
        self._print(f"✓ {result.flow}: {read}{result.output_rows:,} rows written{extra} "
                    f"({result.seconds:.1f}s)")

    def summary(self, result: UpdateResult, bronze: str, quarantine: str, late: str) -> str:
        """The update's time, the delivery counts when the pipeline has a `bronze` table (this
        project's), and each table's rows."""
        if bronze not in result.table_rows:
            return "\n".join([f"Update finished in {result.seconds:.1f}s", "  rows per table:",
                              *[f"    {name:<24} {rows:>10,}"
                                for name, rows in result.table_rows.items()]])
        lines = [
            f"Update finished in {result.seconds:.1f}s",
            f"  records in                  {result.flow_input(bronze):>10,}",
            f"  quarantined                 {result.flow_output(quarantine):>10,}",
            f"  duplicates dropped (silver) {result.total('duplicates_dropped'):>10,}",
            f"  past watermark (silver)     {result.total('late_rows_dropped'):>10,}",
            f"  stale changes ignored       {result.total('cdc_stale'):>10,}",
            f"  late events kept aside      {result.table_rows.get(late, 0):>10,}",
            "  rows per table:",
            *[f"    {name:<24} {rows:>10,}" for name, rows in result.table_rows.items()],
        ]
        return "\n".join(lines)

    @staticmethod
    def top_costs(timeline: Timeline, limit: int = 15) -> str:
        """Where the update's seconds went: own time per flow and phase, costliest first."""
        total = max((s.end for s in timeline.spans), default=0.0)
        lines = [f"Top costs of the {total:.1f}s update (own seconds, each counted once; the "
                 "JVM's CPU seconds of the driver's work and of the tasks):",
                 f"  {'flow':<28} {'phase':<22} {'seconds':>8} {'times':>6} {'Spark jobs':>11}"
                 f" {'driver CPU':>11} {'task CPU':>9}"]

        def cpu(value: float | None, width: int) -> str:
            return f"{'-' if value is None else f'{value:.2f}':>{width}}"
        for c in timeline.top_costs(limit):
            lines.append(f"  {c.flow or '(update)':<28} {c.phase:<22} {c.seconds:>8.2f} "
                         f"{c.spans:>6} {'-' if c.spark_jobs is None else c.spark_jobs:>11} "
                         f"{cpu(c.driver_cpu_seconds, 11)} {cpu(c.task_cpu_seconds, 9)}")
        return "\n".join(lines)
