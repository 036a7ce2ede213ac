"""The event log as a person reads it, for `exactly-once events` (as `databricks pipelines
logs`): one line per event of one update, oldest first."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from exactly_once.errors import InspectError
from exactly_once.local.inspect.delivery import shown_utc
from exactly_once.local.observe import event_log
from exactly_once.local.observe.timeline import UPDATE
from exactly_once.local.storage.schema_evolution import SchemaChange
from exactly_once.local.storage.warehouse import Warehouse

LATEST = "latest"
_SHOWN_PHASES = 3  # the phases a timeline line names, by own seconds


def updates(spark: SparkSession, warehouse: Warehouse) -> list[str]:
    """The update IDs of the event log, newest first."""
    if not warehouse.event_log_path().is_dir():
        raise InspectError(f"no event log in {warehouse.root}; run the pipeline first")
    rows = (event_log.read(spark, warehouse).groupBy("origin.update_id")
            .agg(F.max("sequence.control_plane_seq_no").alias("last"))
            .orderBy(F.desc("last")).collect())
    return [r.update_id for r in rows]


def choose_update(known: list[str], wanted: str) -> str:
    """`latest`, an update ID, or the start of one."""
    if wanted == LATEST and known:
        return known[0]
    matches = [u for u in known if u.startswith(wanted)]
    if len(matches) != 1:
        raise InspectError(f"no update `{wanted}` in the event log; its updates (newest "
                           f"first): {', '.join(known[:5])}{' ...' if len(known) > 5 else ''}")
    return matches[0]


def event_lines(spark: SparkSession, warehouse: Warehouse, update: str,
                flow: str | None = None) -> list[str]:
    events = event_log.read(spark, warehouse).where(F.col("origin.update_id") == update)
    rows = events.orderBy("sequence.control_plane_seq_no").collect()
    if flow is not None:
        flows = sorted({r.origin.flow_name for r in rows if r.origin.flow_name})
        if flow not in flows:
            raise InspectError(f"no events of flow `{flow}` in update {update}; its flows are "
                               f"{', '.join(flows)}")
        rows = [r for r in rows if r.origin.flow_name == flow]
    return [event_line(r) for r in rows]


def event_line(row: Any) -> str:
    when = shown_utc(row.timestamp)
    flow = row.origin.flow_name or UPDATE
    head = f"{when}  {row.level:<7}  {row.event_type:<13}  {flow:<26}"
    details = row.details
    if row.event_type == "flow_progress" and details and details.flow_progress:
        return f"{head}  {_progress(details.flow_progress, row)}"
    if row.event_type == "flow_timeline" and details and details.flow_timeline:
        return f"{head}  {_timeline(details.flow_timeline.spans or [])}"
    return f"{head}  {row.message}"


def _progress(progress: Any, row: Any) -> str:
    if progress.status == "FAILED":
        return f"FAILED: {row.error.message if row.error else row.message}"
    m = progress.metrics
    parts = [f"{progress.status}", f"{m.num_output_rows or 0:,} rows out",
             f"{m.num_input_rows or 0:,} in", f"{m.num_batches or 0} batches"]
    extra = {"duplicates dropped": m.num_duplicates_dropped,
             "stale updates ignored": m.num_stale_updates_ignored,
             "late": m.num_late_events, "CDC rejected": m.num_cdc_rejected}
    parts += [f"{value:,} {name}" for name, value in extra.items() if value]
    snapshots = getattr(progress, "snapshots", None) or []  # absent from older event logs
    parts += [f"snapshot {s.version}: {s.rows_inserted:,} inserted, {s.rows_updated:,} updated, "
              f"{s.rows_deleted:,} deleted" for s in snapshots]
    changes = getattr(progress, "schema_changes", None) or []  # absent from older event logs
    parts += [f"schema: {_schema_change(c)}" for c in changes]
    quality = progress.data_quality
    if quality is not None:
        failed = sum(e.failed_records or 0 for e in quality.expectations or [])
        parts.append(f"expectations: {failed:,} failed, {quality.dropped_records or 0:,} "
                     "dropped")
    return ", ".join(parts) + f" in {m.duration_seconds or 0:.2f} s"


def _schema_change(change: Any) -> str:
    """As schema_evolution.SchemaChange.described says it."""
    return SchemaChange(change.column, change.change, change.data_type,
                        change.previous_type).described()


def _timeline(spans: list[Any]) -> str:
    seconds: dict[str, float] = defaultdict(float)
    for s in spans:
        seconds[s.phase] += s.self_seconds or 0.0
    top = sorted(seconds.items(), key=lambda item: -item[1])[:_SHOWN_PHASES]
    return (f"{len(spans)} phases; most time in "
            + ", ".join(f"{phase} {own:.2f} s" for phase, own in top))
