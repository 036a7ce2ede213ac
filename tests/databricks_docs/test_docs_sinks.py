"""Delta sinks as Databricks documents them: `create_sink` by `path` and by `tableName`, fed by
append flows; and what Databricks refuses of sinks.

Pages:
- create_sink: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-sink
- sinks: https://docs.databricks.com/aws/en/ldp/ldp-sinks
"""

from __future__ import annotations

import uuid

import pytest
from docs_corpus import dp_file, json_files, pipeline, refusal, rows, run

SINK = "https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-sink"
SINKS = "https://docs.databricks.com/aws/en/ldp/ldp-sinks"

REFERRERS = "current_page_id BIGINT, referrer STRING, current_page_title STRING, click_count BIGINT"


def clicks(*pages: int) -> list[dict]:
    return [{"current_page_id": p, "referrer": "search", "current_page_title": f"page {p}",
             "click_count": p * 10} for p in pages]


@pytest.fixture(scope="module")
def sinks(spark, settings, tmp_path_factory):
    """Three updates of a pipeline that streams its referrers into a Delta sink by path and
    one by table name: the second update finds one more click, the third is a full refresh.
    The page ids each sink holds after each update."""
    tmp = tmp_path_factory.mktemp("sinks")
    inbox = json_files(tmp / "inbox", a=clicks(1, 2))
    sink_path = tmp / "delta_sink"
    table_name = f"default.docs_corpus_sink_{uuid.uuid4().hex[:8]}"
    root = pipeline(tmp, sinks=dp_file(f'''
        dp.create_sink("my_delta_sink", "delta", {{"path": "{sink_path}"}})

        dp.create_sink(
          name = "my_table_sink",
          format = "delta",
          options = {{"tableName": "{table_name}"}}
        )

        @dp.table
        def spark_referrers():
          return spark.readStream.format("json").schema("{REFERRERS}").load("{inbox}")

        @dp.append_flow(name = "delta_sink_flow", target = "my_delta_sink")
        def delta_sink_flow():
          return (
            spark.readStream.table("spark_referrers")
            .selectExpr("current_page_id", "referrer", "current_page_title", "click_count")
          )

        @dp.append_flow(name = "table_sink_flow", target = "my_table_sink")
        def table_sink_flow():
          return spark.readStream.table("spark_referrers").select("current_page_id")
        '''))
    warehouse = tmp / "warehouse"
    held = []
    for step in ("first", "second", "full refresh"):
        if step == "second":
            json_files(inbox, b=clicks(3))
        run(spark, settings, root, warehouse, full_refresh=step == "full refresh")
        by_table = sorted(r[0] for r in spark.read.table(table_name).collect())
        held.append((rows(spark, sink_path, "current_page_id"), by_table))
    return held


def test_a_sink_receives_each_row_once(sinks):
    """SINKS: an append flow writes the prepared records to the sink, by path or by table
    name, each new record once across updates."""
    (by_path, by_table), (by_path_2, by_table_2), _ = sinks
    assert (by_path, by_table) == ([(1,), (2,)], [1, 2])
    assert (by_path_2, by_table_2) == ([(1,), (2,), (3,)], [1, 2, 3])


def test_a_full_refresh_appends_to_a_sink_again(sinks):
    """SINK: "Running a full refresh update does not clear data from sinks. Any reprocessed data
    will be appended to the sink, and existing data will not be altered."."""
    by_path, by_table = sinks[2]
    assert by_path == [(1,), (1,), (2,), (2,), (3,), (3,)]
    assert by_table == [1, 1, 2, 2, 3, 3]


# -- refused by Databricks ----------------------------------------------------------------------
SINK_DECLARED = '''
    dp.create_sink("my_sink", "delta", {"path": "/tmp/docs_corpus_never_written"})
    '''


@pytest.mark.parametrize("text, words", [
    # SINK: "Expectations are not supported with the sink API."
    pytest.param(dp_file(SINK_DECLARED, '''
        @dp.append_flow(name="checked_flow", target="my_sink")
        @dp.expect("valid_id", "id IS NOT NULL")
        def checked_flow():
          return spark.readStream.format("rate").load().selectExpr("value AS id")
        '''), ["expect"], id="an expectation on a sink's flow"),
    # SINK: "append flow is the only flow type supported with the create_sink() function.
    # Other flow types, such as create_auto_cdc_flow, are not supported."
    pytest.param(dp_file(SINK_DECLARED, '''
        @dp.temporary_view
        def changes():
          return spark.readStream.format("rate").load().selectExpr("value AS id", "timestamp AS ts")

        dp.create_auto_cdc_flow(target="my_sink", source="changes", keys=["id"], sequence_by="ts")
        '''), ["AUTO CDC"], id="AUTO CDC into a sink"),
    # SINK: format, "either kafka or delta".
    pytest.param(dp_file('''
        dp.create_sink("my_sink", "parquet", {"path": "/tmp/docs_corpus_never_written"})

        @dp.append_flow(target="my_sink")
        def to_parquet():
          return spark.readStream.format("rate").load()
        '''), ["parquet"], id="a sink of another format"),
])
def test_what_databricks_refuses_of_a_sink_is_one_line(in_session, tmp_path, capsys, text,
                                                       words):
    root = pipeline(tmp_path, sinks=text)
    refusal(root, capsys, "sinks", "my_sink", words)
