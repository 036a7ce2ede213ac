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
(rows behind the watermark). The table lives at `<warehouse>/event_log` and survives
`--full-refresh`, like the Databricks event log.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.local.progress import FlowResult
from exactly_once.local.warehouse import Warehouse, is_delta_table

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
                                                        failed_records: BIGINT>>>>>
"""


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
    failed = result.status == "FAILED"
    message = (f"Flow '{result.flow}' has FAILED." if failed
               else f"Flow '{result.flow}' has COMPLETED.")
    return (
        str(uuid.uuid4()), (sequence,),
        (PIPELINE_NAME, pipeline_id, update_id, result.flow, result.target),
        datetime.now(timezone.utc), "ERROR" if failed else "METRICS", "flow_progress", message,
        (result.error,) if failed else None,
        ((result.status, metrics, data_quality),),
    )


def append(spark: SparkSession, warehouse: Warehouse, results: list[FlowResult],
           update_id: str) -> None:
    """Append this update's flow_progress rows in one Delta commit."""
    if not results:
        return
    path = str(warehouse.event_log_path().resolve())
    pipeline_id = str(uuid.uuid5(uuid.NAMESPACE_URL, str(warehouse.root.resolve())))
    start = _next_sequence(spark, path)
    rows = [flow_progress_row(r, update_id, start + i, pipeline_id)
            for i, r in enumerate(results)]
    spark.createDataFrame(rows, DDL).write.format("delta").mode("append").save(path)


def _next_sequence(spark: SparkSession, path: str) -> int:
    if not is_delta_table(path):
        return 1
    # An aggregate without grouping has exactly one row (NULL for an empty table).
    (last,) = spark.read.format("delta").load(path) \
        .agg(F.max("sequence.control_plane_seq_no")).collect()
    return (last[0] or 0) + 1


def read(spark: SparkSession, warehouse: Warehouse) -> DataFrame:
    return spark.read.format("delta").load(str(warehouse.event_log_path().resolve()))
