"""The local pipeline event log: a Delta table shaped like the Databricks pipeline event log.

One `flow_progress` row per flow per update, so the queries written for Databricks work locally:

    SELECT origin.flow_name, details.flow_progress.metrics.num_output_rows,
           details.flow_progress.data_quality.dropped_records,
           explode(details.flow_progress.data_quality.expectations) AS e
    FROM delta.`<warehouse>/event_log` WHERE event_type = 'flow_progress'

Databricks stores `details` as a JSON string (queried with `details:flow_progress:...`); locally
it is a STRUCT (queried with dots). The redelivery counters this project cares about are extra
fields of `details.flow_progress.metrics`: `num_duplicates_dropped` (silver watermark dedup),
`num_stale_updates_ignored` (AUTO CDC changes older than the stored state) and `num_late_events`
(rows behind the watermark). An AUTO CDC FROM SNAPSHOT flow also lists each snapshot it applied
in `details.flow_progress.snapshots`: its version, its rows, and the keys it inserted, updated
and deleted. A flow that changed its table's schema before it wrote (a column added, a type
widened: storage/schema_evolution.py) lists each change in
`details.flow_progress.schema_changes`: the column (a dotted path into a struct column), the
change, the type written and the type before. The table lives at `<warehouse>/event_log` and
survives `--full-refresh`, like the Databricks event log.

Next to them, one `flow_timeline` row per flow per update (and one with no flow for the
update's own work) holds where its seconds went: `details.flow_timeline.spans`, the phases of
`timeline.py` with their start (seconds since the update started), duration, own time (less the
phases inside them) and, when the update was profiled, the Spark jobs each ran:

    SELECT origin.flow_name, s.phase, sum(s.self_seconds) AS seconds
    FROM delta.`<warehouse>/event_log` LATERAL VIEW explode(details.flow_timeline.spans) x AS s
    WHERE event_type = 'flow_timeline' GROUP BY 1, 2 ORDER BY seconds DESC

After them, when the pipeline declares event hooks (graph/event_hooks.py), one `hook_progress`
row per hook: `details.hook_progress` holds its name, its status (COMPLETED, FAILED: it raised
for some events, DISABLED: more consecutive failures than it allows), the events it took and
its failures; `error.message` its last error.

An event log written before the timeline (or the snapshots, or the hooks) existed gains the
column on the first append.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from functools import cache
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, StructType

from exactly_once.local.auto_cdc.from_snapshot.versions import shown
from exactly_once.local.graph.event_hooks import HOOK_PROGRESS, HookRun
from exactly_once.local.observe.progress import FlowResult
from exactly_once.local.observe.timeline import Span, Timeline
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.files import StoragePath
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import Warehouse, statistics_of

PIPELINE_NAME = "exactly_once"

DDL = """
    id STRING, sequence STRUCT<control_plane_seq_no: BIGINT>,
    origin STRUCT<pipeline_name: STRING, pipeline_id: STRING, update_id: STRING,
                  flow_name: STRING, dataset_name: STRING>,
    timestamp TIMESTAMP, level STRING, event_type STRING, message STRING,
    error STRUCT<message: STRING>,
    details STRUCT<flow_progress: STRUCT<
        status: STRING,
        metrics: STRUCT<num_output_rows: BIGINT, num_input_rows: BIGINT, num_batches: BIGINT,
                        num_duplicates_dropped: BIGINT, num_stale_updates_ignored: BIGINT,
                        num_late_events: BIGINT, num_cdc_rejected: BIGINT,
                        duration_seconds: DOUBLE>,
        data_quality: STRUCT<dropped_records: BIGINT,
                             expectations: ARRAY<STRUCT<name: STRING, dataset: STRING,
                                                        passed_records: BIGINT,
                                                        failed_records: BIGINT>>>,
        snapshots: ARRAY<STRUCT<version: STRING, rows: BIGINT, rows_inserted: BIGINT,
                                rows_updated: BIGINT, rows_deleted: BIGINT>>,
        schema_changes: ARRAY<STRUCT<column: STRING, change: STRING, data_type: STRING,
                                     previous_type: STRING>>>,
        flow_timeline: STRUCT<spans: ARRAY<STRUCT<
            phase: STRING, batch_id: BIGINT, detail: STRING, start_seconds: DOUBLE,
            duration_seconds: DOUBLE, self_seconds: DOUBLE, spark_jobs: BIGINT,
            spark_tasks: BIGINT, spark_job_seconds: DOUBLE>>>,
        hook_progress: STRUCT<name: STRING, status: STRING, events_processed: BIGINT,
                              failures: BIGINT>>
"""
# What a reader of the event log filters on, the columns Delta keeps file statistics of
# (`warehouse.statistics_of`).
STATISTICS_COLUMNS = ("timestamp", "event_type", "origin.update_id")
# Sequence numbers: the event log's next Delta version times this, plus the row's place in the
# update's append: increasing across updates without reading the table (one update at a time).
SEQUENCE_STRIDE = 100_000


def new_update_id() -> str:
    return str(uuid.uuid4())


def flow_progress_row(result: FlowResult, update_id: str, sequence: int,
                      pipeline_id: str) -> tuple:
    data_quality = None
    if result.dropped_records is not None:
        data_quality = (result.dropped_records,
                        [(m.name, m.dataset, m.passed_records, m.failed_records)
                         for m in result.expectations])
    metrics = (result.output_rows, result.input_rows, result.batches, result.duplicates_dropped,
               result.cdc_stale, result.late_rows_dropped, result.cdc_rejected,
               round(result.seconds, 3))
    snapshots = [(shown(s.version), s.rows, s.inserted, s.updated, s.deleted)
                 for s in result.snapshots] or None
    schema_changes = [(c.column, c.change, c.data_type, c.previous_type)
                      for c in result.schema_changes] or None
    failed = result.status == "FAILED"
    message = {"FAILED": f"Flow '{result.flow}' has FAILED.",
               "SKIPPED": f"Flow '{result.flow}' is SKIPPED: nothing it reads changed since "
                          "its last refresh."}.get(result.status,
                                                   f"Flow '{result.flow}' has COMPLETED.")
    return (
        str(uuid.uuid4()), (sequence,),
        (PIPELINE_NAME, pipeline_id, update_id, result.flow, result.target),
        datetime.now(timezone.utc), "ERROR" if failed else "METRICS", "flow_progress", message,
        (result.error,) if failed else None,
        ((result.status, metrics, data_quality, snapshots, schema_changes), None, None),
    )


def flow_timeline_row(flow: str | None, dataset: str | None, spans: list[tuple[Span, float]],
                      update_id: str, sequence: int, pipeline_id: str) -> tuple:
    """The phases of one flow (or, with `flow` None, of the update itself) in one row."""
    return (
        str(uuid.uuid4()), (sequence,),
        (PIPELINE_NAME, pipeline_id, update_id, flow, dataset),
        datetime.now(timezone.utc), "METRICS", "flow_timeline",
        f"Timeline of {'flow ' + repr(flow) if flow else 'the update'}: {len(spans)} phases.",
        None,
        (None, ([(s.phase, s.batch, s.detail or None, round(s.start, 4), round(s.seconds, 4),
                  round(own, 4), s.spark_jobs, s.spark_tasks, s.spark_job_seconds)
                 for s, own in spans],), None),
    )


def hook_progress_row(run: HookRun, update_id: str, sequence: int, pipeline_id: str) -> tuple:
    """What one event hook did in the update (graph/event_hooks.py)."""
    status = run.status
    return (
        str(uuid.uuid4()), (sequence,), (PIPELINE_NAME, pipeline_id, update_id, None, None),
        datetime.now(timezone.utc), "INFO" if status == "COMPLETED" else "WARN", HOOK_PROGRESS,
        f"Event hook '{run.hook.name}' has {status}: {run.processed} events processed, "
        f"{run.failures} failures.",
        (run.last_error,) if run.last_error else None,
        (None, None, (run.hook.name, status, run.processed, run.failures)),
    )


def append(spark: SparkSession, warehouse: Warehouse, results: list[FlowResult],
           update_id: str, timeline: Timeline | None = None) -> list[dict[str, Any]]:
    """Append this update's flow_progress and flow_timeline rows in one Delta commit; the
    events appended, each a dictionary of the row's fields."""
    if not results:
        return []
    path = warehouse.event_log_path().resolve()
    pipeline_id = _pipeline_id(warehouse)
    start = (delta_log.latest_version(path) + 1) * SEQUENCE_STRIDE
    rows = [flow_progress_row(r, update_id, start + i, pipeline_id)
            for i, r in enumerate(results)]
    if timeline is not None:
        targets = {r.flow: r.target for r in results}
        spans: dict[str, list[tuple[Span, float]]] = {}
        for span, own in zip(timeline.spans, timeline.self_seconds(), strict=True):
            spans.setdefault(span.flow, []).append((span, own))
        for flow, flow_spans in sorted(spans.items()):
            flow_spans.sort(key=lambda pair: pair[0].start)
            rows.append(flow_timeline_row(flow or None, targets.get(flow), flow_spans,
                                          update_id, start + len(rows), pipeline_id))
    return _appended(spark, path, rows)


def append_hook_progress(spark: SparkSession, warehouse: Warehouse, runs: list[HookRun],
                         update_id: str) -> None:
    """One `hook_progress` row per event hook of the update, in a commit of their own."""
    if not runs:
        return
    path = warehouse.event_log_path().resolve()
    start = (delta_log.latest_version(path) + 1) * SEQUENCE_STRIDE
    _appended(spark, path, [hook_progress_row(run, update_id, start + i, _pipeline_id(warehouse))
                            for i, run in enumerate(runs)])


def _appended(spark: SparkSession, path: StoragePath, rows: list[tuple]) -> list[dict[str, Any]]:
    events = _events(rows)
    # mergeSchema: an event log from before the timeline (or the hooks) gains its column.
    # The statistics' properties take effect where the append creates the table.
    _frame(spark, events).write.format("delta").mode("append") \
        .options(**statistics_of(STATISTICS_COLUMNS)).option("mergeSchema", "true") \
        .save(str(path))
    return events


def _pipeline_id(warehouse: Warehouse) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, str(warehouse.root.resolve())))


@cache
def _schema() -> StructType:
    """DDL as a schema (parsed by the JVM: once a session exists)."""
    schema = StructType.fromDDL(DDL)
    assert isinstance(schema, StructType)
    return schema


def _events(rows: list[tuple]) -> list[dict[str, Any]]:
    """`rows` (tuples of DDL's shape) as dictionaries of their fields, nested ones too: as an
    event hook is given an event, and as Arrow reads a row."""
    return [_by_name(row, _schema()) for row in rows]


def as_frame(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    """`rows` (tuples of DDL's shape) as a DataFrame."""
    return _frame(spark, _events(rows))


def _frame(spark: SparkSession, events: list[dict[str, Any]]) -> DataFrame:
    """The events as a DataFrame, built in the JVM from Arrow. PySpark makes a DataFrame of a
    Python list through its Python worker, a process each new JVM starts for it: 0.8 s of a
    new process's first update (BENCHMARKS.md, issue 25)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    table = pa.Table.from_pylist(events, schema=to_arrow_schema(_schema(), timezone="UTC"))
    return spark.createDataFrame(table, _schema())


def _by_name(value: Any, data_type: DataType) -> Any:
    """A value of nested tuples as Arrow reads it: each struct a dict of its field names."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        return {f.name: _by_name(v, f.dataType) for f, v in zip(data_type.fields, value,
                                                                 strict=True)}
    if isinstance(data_type, ArrayType):
        return [_by_name(v, data_type.elementType) for v in value]
    return value


def read(spark: SparkSession, warehouse: Warehouse) -> DataFrame:
    """The event log as of its latest version, for one look (`events`, the test harness): read
    as the Parquet files the version names (`snapshot_files.read_latest`), about a tenth of
    what Delta's reader costs a log the session has not read since its last update."""
    return read_latest(spark, str(warehouse.event_log_path().resolve()))
