"""A streaming flow whose sources hold nothing its checkpoint has not read starts no query
(issue 58, execution/unread.py): its table keeps its version and the event log says SKIPPED.
A flow with a source that is not a Delta table, or with a micro-batch to run again, is started
every update, as before; new rows are all read the next time. (A flow with a watermark:
databricks_docs/test_docs_stateful_processing.py.)"""

from __future__ import annotations

import shutil
from textwrap import dedent

import pytest

from exactly_once.errors import FlowError
from exactly_once.local.execution.checkpoints import batch_ids
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe import event_log
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import Warehouse

PIPELINE = '''
from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.table(name="events")
def events():
    return spark.readStream.format("delta").load("{source}")


@dp.table(name="doubled")
def doubled():
    return spark.readStream.table("events").select("k", (F.col("v") * 2).alias("v"))


dp.create_streaming_table("latest")
dp.create_auto_cdc_flow(target="latest", source="events", keys=["k"], sequence_by="v",
                        stored_as_scd_type=1)


@dp.table(name="from_files")
def from_files():
    return spark.readStream.format("json").schema("k STRING, v INT").load("{files}")

'''
READS_DELTA_ONLY = {"events", "doubled", "latest"}


def test_a_stream_with_nothing_new_to_read_is_skipped(spark, settings, tmp_path):
    source, files = tmp_path / "source", tmp_path / "files"
    pipelines, warehouse = tmp_path / "pipelines", tmp_path / "warehouse"
    pipelines.mkdir()
    files.mkdir()
    (files / "a.json").write_text('{"k": "a", "v": 1}\n')
    (pipelines / "streams.py").write_text(dedent(PIPELINE).format(source=source, files=files))
    spark.createDataFrame([("a", 1), ("b", 2)], "k STRING, v INT").write.format("delta") \
        .save(str(source))

    def update() -> dict[str, str]:
        timeline = Timeline()
        result = run_pipeline(spark, settings, warehouse, pipelines_dir=pipelines,
                              timeline=timeline)
        statuses = {f.flow: f.status for f in result.flows}
        started = {s.flow for s in timeline.spans if s.phase == "query start"}
        assert started == {f for f, status in statuses.items() if status != "SKIPPED"}
        return statuses

    def versions() -> dict[str, int]:
        return {t: delta_log.latest_version(warehouse / t) for t in READS_DELTA_ONLY}

    def rows(table: str) -> list[tuple]:
        return sorted(map(tuple, read_latest(spark, str(warehouse / table)).collect()))

    assert set(update().values()) == {"COMPLETED"}
    before = versions()
    # Nothing new in `source`, so nothing new in `events`: the three flows that read only them
    # start nothing; a file source is asked.
    assert update() == {"events": "SKIPPED", "doubled": "SKIPPED", "latest": "SKIPPED",
                        "from_files": "COMPLETED"}
    assert versions() == before
    log = event_log.read(spark, Warehouse(warehouse)).where(
        "event_type = 'flow_progress' AND origin.flow_name = 'doubled'")
    assert sorted(r.status for r in log.select("details.flow_progress.status").collect()) \
        == ["COMPLETED", "SKIPPED"]

    # New rows: read, each once.
    spark.createDataFrame([("a", 5), ("c", 3)], "k STRING, v INT").write.format("delta") \
        .mode("append").save(str(source))
    assert set(update().values()) == {"COMPLETED"}
    assert rows("doubled") == [("a", 2), ("a", 10), ("b", 4), ("c", 6)]
    assert rows("latest") == [("a", 5), ("b", 2), ("c", 3)]

    # A crash after `doubled`'s last write and before its checkpoint's commit: that batch is
    # run again (its write, already committed, is not repeated), though no source has news.
    commits = Warehouse(warehouse).checkpoint_path("doubled") / "commits"
    last = batch_ids(commits)[-1]
    for written in (commits / str(last), commits / f".{last}.crc"):
        written.unlink(missing_ok=True)
    statuses = update()
    assert statuses["doubled"] == "COMPLETED" and statuses["latest"] == "SKIPPED"
    assert rows("doubled") == [("a", 2), ("a", 10), ("b", 4), ("c", 6)]

    # The source dropped and created again at its path, with the same rows and versions: another
    # table (another id), which `events` is started for, and Delta refuses to read it on.
    shutil.rmtree(source)
    spark.createDataFrame([("a", 1), ("b", 2)], "k STRING, v INT").write.format("delta") \
        .save(str(source))
    spark.createDataFrame([("a", 5), ("c", 3)], "k STRING, v INT").write.format("delta") \
        .mode("append").save(str(source))
    with pytest.raises(FlowError, match="flow `events` failed"):
        run_pipeline(spark, settings, warehouse, pipelines_dir=pipelines)
