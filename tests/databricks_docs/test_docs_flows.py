"""Flows as Databricks documents them: several append flows into one streaming table that
`create_streaming_table` declares, a one-time backfill (`once=True`), a flow's own name, comment
and `spark_conf`.

Pages:
- append_flow: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-append-flow
- create_streaming_table:
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-streaming-table
- flows, multiple flows into one target, backfills: https://docs.databricks.com/aws/en/ldp/flows
  and https://docs.databricks.com/aws/en/ldp/flow-examples
- current_timezone: https://docs.databricks.com/aws/en/sql/language-manual/functions/current_timezone
"""

from __future__ import annotations

import pytest
from docs_corpus import detail, dp_file, json_files, pipeline, refusal, rows, run, run_refusal

APPEND_FLOW = "https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-append-flow"
STREAMING_TABLE = "https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-streaming-table"
FLOW_EXAMPLES = "https://docs.databricks.com/aws/en/ldp/flow-examples"

ORDERS = "order_id BIGINT, region STRING"


@pytest.fixture(scope="module")
def regions(spark, settings, tmp_path_factory):
    """Three updates of one streaming table fed by two regions' flows and a one-time backfill:
    the second update finds a new east order and a new backfill file, the third is a full
    refresh. Each update's result and the table's (order_id, zone) after it."""
    tmp = tmp_path_factory.mktemp("flows")
    east = json_files(tmp / "east", a=[{"order_id": 1, "region": "east"}])
    west = json_files(tmp / "west", a=[{"order_id": 2, "region": "west"}])
    history = json_files(tmp / "history", a=[{"order_id": 10, "region": "east"},
                                             {"order_id": 11, "region": "west"}])
    root = pipeline(tmp, orders=dp_file(f'''
        dp.create_streaming_table(
          name="all_orders",
          comment="Orders from every region",
          table_properties={{"quality": "silver"}},
          partition_cols=["region"])

        @dp.append_flow(target="all_orders")
        def east():
          return (spark.readStream.format("json").schema("{ORDERS}").load("{east}")
                  .withColumn("zone", F.current_timezone()))

        @dp.append_flow(
          target="all_orders",
          name="west_flow",
          comment="Orders from the west",
          spark_conf={{"spark.sql.session.timeZone": "Asia/Tokyo"}})
        def west():
          return (spark.readStream.format("json").schema("{ORDERS}").load("{west}")
                  .withColumn("zone", F.current_timezone()))

        @dp.append_flow(
          target="all_orders",
          once=True)
        def backfill():
          return (spark.read.format("json").schema("{ORDERS}").load("{history}")
                  .withColumn("zone", F.current_timezone()))
        '''))
    warehouse = tmp / "warehouse"
    zone = spark.conf.get("spark.sql.session.timeZone")
    updates = []
    for step in ("first", "second", "full refresh"):
        if step == "second":
            json_files(east, b=[{"order_id": 3, "region": "east"}])
            json_files(history, b=[{"order_id": 12, "region": "east"}])
        result = run(spark, settings, root, warehouse, full_refresh=step == "full refresh")
        updates.append((result, rows(spark, warehouse / "all_orders", "order_id", "zone")))
    return warehouse, zone, updates


def test_each_flow_appends_its_rows_once(regions):
    """FLOW_EXAMPLES, "Use multiple flows to write to a single target": the table holds every
    flow's rows, each new row appended once."""
    _, _, updates = regions
    (_, first), (_, second), _ = updates
    assert [order for order, _ in first] == [1, 2, 10, 11]
    assert [order for order, _ in second] == [1, 2, 3, 10, 11]


def test_a_once_flow_runs_one_time_and_again_after_a_full_refresh(regions):
    """APPEND_FLOW, once: "The return value ... must be a batch DataFrame", "The flow is run one
    time by default. If the pipeline is updated with a complete refresh, then the ONCE flow runs
    again to recreate the data": order 12, added after the first update, arrives only with the
    full refresh."""
    _, _, updates = regions
    assert 12 not in [order for order, _ in updates[1][1]]
    assert [order for order, _ in updates[2][1]] == [1, 2, 3, 10, 11, 12]


def test_a_flow_is_named_by_name_else_by_its_function(regions):
    """APPEND_FLOW, name: "The flow name. If not provided, defaults to the function name."."""
    _, _, updates = regions
    first, _ = updates[0]
    assert {"east", "west_flow", "backfill"} <= {f.flow for f in first.flows}


def test_a_flow_s_spark_conf_is_its_own(regions):
    """APPEND_FLOW, spark_conf: "A list of Spark configurations for the execution of this
    query": the west flow's session time zone is Tokyo's, the other flows keep the
    pipeline's."""
    _, zone, updates = regions
    _, table = updates[2]
    assert table == [(1, zone), (2, "Asia/Tokyo"), (3, zone), (10, zone), (11, zone),
                     (12, zone)]


def test_create_streaming_table_s_options_reach_delta(spark, regions):
    """STREAMING_TABLE: comment, table_properties and partition_cols of the target table."""
    warehouse, _, _ = regions
    table = detail(spark, warehouse / "all_orders")
    assert table["description"] == "Orders from every region"
    assert table["properties"].get("quality") == "silver"
    assert table["partitionColumns"] == ["region"]


# -- refused ------------------------------------------------------------------------------------
def test_a_once_flow_over_a_stream_is_one_line(in_session, tmp_path, capsys):
    """APPEND_FLOW, once: the query "must be a batch DataFrame in this case, not a streaming
    DataFrame"."""
    root = pipeline(tmp_path, orders=dp_file('''
        dp.create_streaming_table("all_orders")

        @dp.append_flow(target="all_orders", once=True)
        def backfill():
          return spark.readStream.format("rate").load()
        '''))
    refusal(root, capsys, "orders", "all_orders", ["once"])


def test_an_append_flow_over_a_batch_query_is_one_line(in_session, settings, tmp_path, capsys):
    """APPEND_FLOW: a flow without `once` appends a stream ("Use spark.readStream ... to return
    a streaming DataFrame"); a batch query into a streaming table is refused by `dry-run` and
    by `run` in the same line, as SQL's INSERT INTO without STREAM is."""
    root = pipeline(tmp_path, orders=dp_file('''
        dp.create_streaming_table("all_orders")

        @dp.append_flow(target="all_orders")
        def backfill():
          return spark.range(3).withColumnRenamed("id", "order_id")
        '''))
    line = refusal(root, capsys, "orders", "all_orders", ["backfill", "not a stream"])
    assert run_refusal(in_session, settings, root, tmp_path / "warehouse") == line
