"""`dp.append_flow` with Databricks' signature: `name`, `once`, `spark_conf`, `comment`.

Databricks' reference (https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-append-flow,
and for `once` https://docs.databricks.com/aws/en/ldp/flows-backfill): `once=True` makes a
one-time flow, such as a backfill; its query is a batch DataFrame; it runs once, and again when a
full refresh recreates its target. What the runtime does not implement is refused at load, one
line naming the file and the dataset.
"""

from __future__ import annotations

import json
from textwrap import dedent

import pytest
from pyspark.pipelines.flow import Flow
from test_cli_dry_run import dry_run, pipeline_dir
from test_declaration_errors import expected

from exactly_once import cli
from exactly_once.errors import FlowError
from exactly_once.local.execution import flows
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.graph.flow_declarations import DeclaredFlow
from exactly_once.local.graph.loader import load_graph
from exactly_once.local.storage.warehouse import Warehouse

HEADER = "from pyspark import pipelines as dp\n"

# `events`: a streaming flow of `live` (a Delta table outside the pipeline) and a backfill of
# `history`, read as a batch once.
EVENTS = HEADER + '''
dp.create_streaming_table("events")

@dp.append_flow(target="events", name="live_events", comment="the live feed",
                spark_conf={{"spark.sql.shuffle.partitions": "3"}})
def live():
    return spark.readStream.format("delta").load({live!r})

@dp.append_flow(target="events", once=True, comment="what happened before the feed")
def backfill():
    return spark.read.format("delta").load({history!r})
'''


def write_ids(spark, path, ids: list[int]) -> None:
    spark.createDataFrame([(i,) for i in ids], "id BIGINT").write.format("delta") \
        .mode("append").save(str(path))


class Backfilled:
    """A pipeline whose `events` table has a live flow and a once backfill."""

    def __init__(self, spark, settings, root):
        self.spark, self.settings = spark, settings
        self.live, self.history = root / "live", root / "history"
        self.files = pipeline_dir(root, events=EVENTS.format(live=str(self.live),
                                                              history=str(self.history)))
        self.warehouse = root / "warehouse"

    def run(self, **kwargs):
        return run_pipeline(self.spark, self.settings, self.warehouse, pipelines_dir=self.files,
                            **kwargs)

    def events(self) -> list[int]:
        return sorted(r.id for r in self.spark.read.format("delta")
                      .load(str(self.warehouse / "events")).collect())


def test_append_flow_keeps_databricks_arguments_on_a_pyspark_flow(spark, tmp_path):
    files = pipeline_dir(tmp_path, events=EVENTS.format(live="/nowhere", history="/nowhere"))
    graph = load_graph(spark, [files / "events.py"])
    live, backfill = graph.flows_into("events")
    assert isinstance(live, Flow) and isinstance(live, DeclaredFlow)
    assert (live.name, live.once, live.comment, dict(live.spark_conf)) == (
        "live_events", False, "the live feed", {"spark.sql.shuffle.partitions": "3"})
    assert (backfill.name, backfill.once, backfill.comment, dict(backfill.spark_conf)) == (
        "backfill", True, "what happened before the feed", {})


def test_graph_shows_a_once_flow_and_a_flow_s_comment(in_session, tmp_path, capsys):
    for source in ("live", "history"):  # the queries are analyzed: their sources must exist
        write_ids(in_session, tmp_path / source, [])
    files = pipeline_dir(tmp_path, events=EVENTS.format(live=str(tmp_path / "live"),
                                                        history=str(tmp_path / "history")))
    code = cli.main(["graph", "--pipelines", str(files), "--format", "json"])
    graph = json.loads(capsys.readouterr().out)
    assert code == 0
    shown = {f["name"]: (f["kind"], f["comment"]) for f in graph["flows"]}
    assert shown == {"live_events": ("append", "the live feed"),
                     "backfill": ("append once", "what happened before the feed")}


def test_a_backfill_runs_once_even_when_killed_after_its_commit_and_again_after_a_full_refresh(
        spark, settings, tmp_path, monkeypatch):
    pipeline = Backfilled(spark, settings, tmp_path)
    write_ids(spark, pipeline.live, [1, 2])
    write_ids(spark, pipeline.history, [100, 101])
    # Killed after the backfill's commit into `events`, before it recorded that it ran.
    recorded = flows.record_once

    def killed(*args):
        raise RuntimeError("killed after the backfill's commit")

    monkeypatch.setattr(flows, "record_once", killed)
    with pytest.raises(FlowError, match="killed"):
        pipeline.run()
    monkeypatch.setattr(flows, "record_once", recorded)
    result = pipeline.run()
    assert pipeline.events() == [1, 2, 100, 101]  # the commit was found: not written again
    (backfill,) = [f for f in result.flows if f.flow == "backfill"]
    assert (backfill.kind, backfill.output_rows) == ("append_once", 0)

    write_ids(spark, pipeline.live, [3])
    write_ids(spark, pipeline.history, [102])
    result = pipeline.run()  # the live flow reads what is new; the backfill does not run
    assert pipeline.events() == [1, 2, 3, 100, 101]
    assert [f.output_rows for f in result.flows if f.flow == "backfill"] == [0]

    pipeline.run(full_refresh=["events"])  # the target recreated: the backfill runs again
    assert pipeline.events() == [1, 2, 3, 100, 101, 102]
    once_marker = Warehouse(pipeline.warehouse).once_marker_path("backfill")
    assert once_marker.is_file()


def test_a_once_flow_over_a_stream_is_one_line(spark, settings, tmp_path):
    live = tmp_path / "live"
    write_ids(spark, live, [1])
    files = pipeline_dir(tmp_path, events=HEADER + dedent(f'''
        dp.create_streaming_table("events")

        @dp.append_flow(target="events", once=True)
        def backfill():
            return spark.readStream.format("delta").load({str(live)!r})
        '''))
    with pytest.raises(FlowError) as failure:
        run_pipeline(spark, settings, tmp_path / "warehouse", pipelines_dir=files)
    assert str(failure.value) == (
        "flow `backfill` is a once flow (once=True): its query must be a batch DataFrame "
        "(spark.read), not a stream")
    assert not (tmp_path / "warehouse" / "events").exists()


# -- what is refused at load: (files, the file the line names, the dataset, what is wrong) ---------
def flow_file(arguments: str) -> dict[str, str]:
    return {"events": HEADER + dedent(f"""
        dp.create_streaming_table("events")

        @dp.append_flow(target="events", {arguments})
        def more():
            return spark.readStream.format("rate").load()
        """)}


REFUSED = {
    "depends_on": (
        flow_file('depends_on="other"'), "events", "events",
        "append_flow: depends_on is not supported by the local runtime"),
    "import_checkpoint": (
        flow_file('import_checkpoint="/checkpoints/more"'), "events", "events",
        "append_flow: import_checkpoint is not supported by the local runtime"),
    "a name that is not a string": (
        flow_file("name=42"), "events", "events", "append_flow: name must be a string, got 42"),
    # Beta flows of Databricks' newest reference pages, refused by name rather than missing.
    "replace_flow": (
        {"events": HEADER + dedent("""
            dp.create_streaming_table("events")

            @dp.replace_flow(target="events", replace_using=["id"], sequence_by="seq")
            def more():
                return spark.readStream.format("rate").load()
            """)}, "events", "events",
        "replace_flow (Beta: a replace flow) is not supported by the local runtime"),
    "update_flow": (
        {"events": HEADER + dedent("""
            dp.create_streaming_table("events")

            @dp.update_flow(target="events")
            def more():
                return spark.readStream.format("rate").load()
            """)}, "events", "events",
        "update_flow (Beta: an update flow) is not supported by the local runtime"),
    "a table's replace flow": (
        {"events": HEADER + dedent("""
            @dp.table(name="events", replace_using=["id"], sequence_by="seq")
            def events():
                return spark.readStream.format("rate").load()
            """)}, "events", "events",
        "table: replace_using and sequence_by (Beta: a replace flow) are not supported by the "
        "local runtime"),
    "spark_conf that is not a dict": (
        flow_file('spark_conf=["a"]'), "events", "events",
        "append_flow: spark_conf must be a dict of Spark settings, got ['a']"),
}


@pytest.mark.parametrize("files, file, dataset, message",
                         [pytest.param(*case, id=name) for name, case in REFUSED.items()])
def test_what_append_flow_does_not_support_is_refused_at_load(in_session, tmp_path, capsys,
                                                             files, file, dataset, message):
    root = pipeline_dir(tmp_path, **files)
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [expected(root, file, dataset, message)])
