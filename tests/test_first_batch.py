"""A new streaming query's first batch: the upstream table's commits when they only appended,
its snapshot otherwise (execution/update.py, storage/delta_log.py). Either way the same rows."""

from __future__ import annotations

import textwrap
from pathlib import Path

from exactly_once.local.execution.refresh import RefreshSelection
from exactly_once.local.execution.update import PipelineUpdate
from exactly_once.local.graph.loader import load_graph
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.paths import pipeline_files

PIPELINE = """
    from pyspark import pipelines as dp

    @dp.table(name="upstream")
    def upstream():
        return spark.readStream.format("delta").load({source!r})

    @dp.table(name="downstream")
    def downstream():
        return spark.readStream.table("upstream")
"""


def start_jobs(spark, graph, warehouse, selection=None) -> int:
    """An update; the Spark jobs `downstream`'s query ran to find its first batch's end."""
    timeline = Timeline(spark_jobs=True)
    PipelineUpdate(spark, graph, warehouse, timeline=timeline).run(selection)
    (span,) = [s for s in timeline.of_flow("downstream")
               if s.phase == "latestOffset" and s.batch == 0]
    return span.spark_jobs


def upstream_of_rows_0_to_2(spark, tmp_path: Path) -> tuple[Path, PipelineGraph, Warehouse]:
    """A source table of ids 0-2, the pipeline of PIPELINE over it, and its empty warehouse."""
    source = tmp_path / "source"
    spark.range(0, 3).write.format("delta").save(str(source))
    directory = tmp_path / "pipeline"
    directory.mkdir()
    (directory / "defs.py").write_text(textwrap.dedent(PIPELINE.format(source=str(source))))
    return source, load_graph(spark, pipeline_files(directory)), Warehouse(tmp_path / "wh")


def ids(spark, path: Path) -> list[int]:
    return sorted(r.id for r in spark.read.format("delta").load(str(path)).collect())


def test_a_new_query_reads_appended_commits_and_falls_back_to_the_snapshot(spark, tmp_path):
    source, graph, warehouse = upstream_of_rows_0_to_2(spark, tmp_path)
    upstream = warehouse.table_path("upstream")

    PipelineUpdate(spark, graph, warehouse).run()
    spark.range(3, 5).write.format("delta").mode("append").save(str(source))
    PipelineUpdate(spark, graph, warehouse).run()
    assert delta_log.appends_since_creation(upstream)
    # A new query of `downstream` (its full refresh) found its first batch in the upstream's
    # commits, without a Spark job, not in a snapshot of it.
    assert start_jobs(spark, graph, warehouse, RefreshSelection.of(["downstream"], ())) == 0
    assert ids(spark, warehouse.table_path("downstream")) == [0, 1, 2, 3, 4]

    # A commit that removes rows: a new query of `downstream` reads the snapshot, where a
    # read of the commits would fail on the removed file (or return the deleted rows).
    spark.sql(f"DELETE FROM delta.`{upstream}` WHERE id = 1")
    assert not delta_log.appends_since_creation(upstream)
    assert start_jobs(spark, graph, warehouse, RefreshSelection.of(["downstream"], ())) > 0
    assert ids(spark, warehouse.table_path("downstream")) == [0, 2, 3, 4]


def test_only_appends_from_version_0_read_as_the_snapshot(spark, tmp_path):
    table = str(tmp_path / "t")
    assert not delta_log.appends_since_creation(table)  # no table
    spark.range(2).write.format("delta").save(table)
    spark.range(2, 4).write.format("delta").mode("append").save(table)
    assert delta_log.appends_since_creation(table)
    assert not delta_log.appends_since_creation(table, max_versions=1)  # too long to read
    spark.sql(f"ALTER TABLE delta.`{table}` ADD COLUMNS (note STRING)")
    assert not delta_log.appends_since_creation(table)  # its schema changed after creation


def test_a_restarted_query_finds_its_first_batch_again_without_a_spark_job(spark, tmp_path):
    """A query restarted from a checkpoint that logged only its first batch: Spark asks the
    source for that batch again (to run it again, or to set the source up), and Delta builds it
    from the upstream's snapshot unless the query names its starting version: Spark jobs in
    every such restart, with no new data at all."""
    _, graph, warehouse = upstream_of_rows_0_to_2(spark, tmp_path)

    PipelineUpdate(spark, graph, warehouse).run()  # `downstream` logged batch 0
    timeline = Timeline(spark_jobs=True)
    PipelineUpdate(spark, graph, warehouse, timeline=timeline).run()  # nothing new
    assert [s.spark_jobs for s in timeline.of_flow("downstream") if s.spark_jobs] == []
    assert ids(spark, warehouse.table_path("downstream")) == [0, 1, 2]
