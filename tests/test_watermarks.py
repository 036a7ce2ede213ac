"""Stateful streaming flows with a watermark run as Databricks runs them: Spark's defaults, so a
triggered update that moves the watermark also runs the batch without data that emits what the
new watermark closed (`spark.sql.streaming.noDataMicroBatches.enabled`, true in Spark and on
Databricks).

The pipeline is the windowed aggregation of Databricks' page on stateful processing, in Python
and with SQL's WATERMARK clause:
  https://docs.databricks.com/aws/en/ldp/stateful-processing
  https://docs.databricks.com/aws/en/sql/language-manual/sql-ref-syntax-qry-select-watermark
Each window is emitted once, in the update whose data moved the watermark past its end; an
update with nothing new starts nothing and changes nothing, as Spark's own query, started with
nothing new, runs no batch.
"""

from __future__ import annotations

import json

from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.snapshot_files import read_latest

PIPELINE_PY = '''
from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.table
def readings():
    return spark.readStream.format("json").schema("id BIGINT, ts TIMESTAMP").load("{source}")


@dp.table
def per_ten_minutes():
    return (spark.readStream.table("readings").withWatermark("ts", "10 minutes")
            .groupBy(F.window("ts", "10 minutes")).agg(F.count("*").alias("readings")))
'''
PIPELINE_SQL = """
CREATE OR REFRESH STREAMING TABLE per_ten_minutes_sql
AS SELECT window(ts, '10 minutes') AS w, count(*) AS readings
FROM STREAM readings WATERMARK ts DELAY OF INTERVAL 10 MINUTES AS r
GROUP BY window(ts, '10 minutes');
"""
WINDOWED = ("per_ten_minutes", "per_ten_minutes_sql")


def at(minute: int) -> str:
    return f"2026-11-01T10:{minute:02d}:00"


def windows(spark, warehouse, table: str) -> list[tuple[str, int]]:
    """(window start as HH:MM, count), in order."""
    rows = read_latest(spark, str(warehouse / table)).collect()
    return sorted((row[0].start.strftime("%H:%M"), row[1]) for row in rows)


def test_an_update_emits_the_windows_its_watermark_closed(spark, settings, tmp_path):
    source, pipelines, warehouse = tmp_path / "source", tmp_path / "pipelines", tmp_path / "wh"
    source.mkdir()
    pipelines.mkdir()
    (pipelines / "readings.py").write_text(PIPELINE_PY.format(source=source))
    (pipelines / "windows.sql").write_text(PIPELINE_SQL)

    def update(minutes: list[int], name: str) -> dict[str, str]:
        if minutes:
            (source / f"{name}.json").write_text("\n".join(
                json.dumps({"id": m, "ts": at(m)}) for m in minutes))
        result = run_pipeline(spark, settings, warehouse, pipelines_dir=pipelines,
                              timeline=Timeline())
        return {f.flow: f.status for f in result.flows}

    # 10:00-10:25: the watermark moves to 10:15, which closes [10:00, 10:10) only.
    update([0, 5, 10, 15, 20, 25], "first")
    for table in WINDOWED:
        assert windows(spark, warehouse, table) == [("10:00", 2)], table

    # 10:40: the watermark moves to 10:30; [10:10, 10:20) and [10:20, 10:30) close, once each.
    update([40], "second")
    for table in WINDOWED:
        assert windows(spark, warehouse, table) == [
            ("10:00", 2), ("10:10", 2), ("10:20", 2)], table

    # Nothing new: Spark's query would run no batch (none is due at a start), so none starts.
    versions = {t: delta_log.latest_version(warehouse / t) for t in WINDOWED}
    statuses = update([], "none")
    assert {statuses[t] for t in WINDOWED} == {"SKIPPED"}
    assert {t: delta_log.latest_version(warehouse / t) for t in WINDOWED} == versions
