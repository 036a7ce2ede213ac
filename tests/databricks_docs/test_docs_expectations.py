"""Every expectation decorator of Databricks' reference on every kind of dataset: streaming
tables, materialized views, temporary views, append flows, and `create_streaming_table`'s
`expect_all*` arguments. The rules are the expectations page's `valid_pages`.

Pages:
- expectations: https://docs.databricks.com/aws/en/ldp/expectations
- the decorators: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-expectations
- create_streaming_table:
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-streaming-table
- the event log's data quality metrics: https://docs.databricks.com/aws/en/ldp/monitor-event-logs
"""

from __future__ import annotations

import pytest
from docs_corpus import dp_file, expectation_metrics, json_files, pipeline, rows, run

from exactly_once.errors import FlowError

EXPECTATIONS = "https://docs.databricks.com/aws/en/ldp/expectations"
EVENT_LOG = "https://docs.databricks.com/aws/en/ldp/monitor-event-logs"

PAGES = "current_page_id BIGINT, current_page_title STRING, count BIGINT"
# Page 1 passes both rules; page 2 fails both; the page without an id fails valid_current_page.
RECORDS = [
    {"current_page_id": 1, "current_page_title": "Home", "count": 3},
    {"current_page_id": 2, "current_page_title": None, "count": 0},
    {"current_page_id": None, "current_page_title": "About", "count": 5},
]
VALID_PAGES = ('valid_pages = {"valid_count": "count > 0", "valid_current_page": '
               '"current_page_id IS NOT NULL AND current_page_title IS NOT NULL"}\n')


@pytest.fixture(scope="module")
def warned_and_dropped(spark, settings, tmp_path_factory):
    """One update of a pipeline where each warn and drop decorator guards a dataset of its
    own; its warehouse."""
    tmp = tmp_path_factory.mktemp("expectations")
    inbox = json_files(tmp / "inbox", a=RECORDS)
    root = pipeline(tmp, pages=dp_file(VALID_PAGES, f'''
        @dp.table
        @dp.expect_all(valid_pages)
        def raw_data():
          return spark.readStream.format("json").schema("{PAGES}").load("{inbox}")

        @dp.materialized_view
        @dp.expect_all_or_drop(valid_pages)
        def prepared_data():
          return spark.read.table("raw_data")

        @dp.materialized_view
        @dp.expect("valid_count", "count > 0")
        def counted_pages():
          return spark.read.table("raw_data")

        @dp.temporary_view
        @dp.expect_or_drop("valid_count", "count > 0")
        def pages_with_clicks():
          return spark.readStream.table("raw_data")

        @dp.table
        def clicked_pages():
          return spark.readStream.table("pages_with_clicks")

        dp.create_streaming_table(
          name = "clean_pages",
          expect_all_or_drop = {{"valid_current_page":
                                 "current_page_id IS NOT NULL AND current_page_title IS NOT NULL"}})

        @dp.append_flow(target = "clean_pages")
        @dp.expect_or_drop("valid_count", "count > 0")
        def clean_pages_flow():
          return spark.readStream.table("raw_data")
        '''))
    warehouse = tmp / "warehouse"
    run(spark, settings, root, warehouse)
    return warehouse


def pages(spark, warehouse, table):
    return [page for page, in rows(spark, warehouse / table, "current_page_id")]


def test_warn_keeps_every_record(spark, warned_and_dropped):
    """EXPECTATIONS, warn (expect, expect_all): "Invalid records are written to the target", on
    a streaming table and a materialized view."""
    assert pages(spark, warned_and_dropped, "raw_data") == [1, 2, None]
    assert pages(spark, warned_and_dropped, "counted_pages") == [1, 2, None]


def test_drop_keeps_only_valid_records(spark, warned_and_dropped):
    """EXPECTATIONS, drop (expect_or_drop, expect_all_or_drop): "Invalid records are dropped
    before data is written to the target", on a materialized view, a temporary view (its
    reader never sees them), an append flow and create_streaming_table's expect_all_or_drop."""
    assert pages(spark, warned_and_dropped, "prepared_data") == [1]
    assert pages(spark, warned_and_dropped, "clicked_pages") == [1, None]
    assert pages(spark, warned_and_dropped, "clean_pages") == [1]


def test_the_event_log_counts_each_expectation(spark, warned_and_dropped):
    """EVENT_LOG: each flow_progress event's details.flow_progress.data_quality.expectations,
    per expectation its dataset, passed_records and failed_records."""
    metrics = expectation_metrics(spark, warned_and_dropped)
    assert metrics[("raw_data", "valid_count")] == ("raw_data", 2, 1)
    assert metrics[("raw_data", "valid_current_page")] == ("raw_data", 1, 2)
    assert metrics[("prepared_data", "valid_count")] == ("prepared_data", 2, 1)
    assert metrics[("prepared_data", "valid_current_page")] == ("prepared_data", 1, 2)
    assert metrics[("counted_pages", "valid_count")] == ("counted_pages", 2, 1)


def test_fail_stops_its_own_flow_only(spark, settings, tmp_path):
    """EXPECTATIONS, fail (expect_or_fail, expect_all_or_fail, create_streaming_table's
    expect_all_or_fail): "Invalid records prevent the update from succeeding", "If the
    operation is a table update, the system atomically rolls back the transaction", and "This
    expectation causes a failure of a single flow and does not cause other flows in your
    pipeline to fail"."""
    inbox = json_files(tmp_path / "inbox", a=RECORDS)
    root = pipeline(tmp_path, pages=dp_file(VALID_PAGES, f'''
        @dp.table
        @dp.expect_all_or_fail(valid_pages)
        def customer_facing_data():
          return spark.readStream.format("json").schema("{PAGES}").load("{inbox}")

        @dp.materialized_view
        @dp.expect_or_fail("valid_count", "count > 0")
        def checked_totals():
          return spark.read.format("json").schema("{PAGES}").load("{inbox}")

        dp.create_streaming_table(
          name = "clicked_pages",
          expect_all_or_fail = {{"valid_count": "count > 0"}})

        @dp.append_flow(target = "clicked_pages")
        def clicked_pages_flow():
          return (spark.readStream.format("json").schema("{PAGES}").load("{inbox}")
                  .where("count > 0"))
        '''))
    warehouse = tmp_path / "warehouse"
    with pytest.raises(FlowError) as failed:
        run(spark, settings, root, warehouse)
    assert "valid_count" in str(failed.value) or "valid_current_page" in str(failed.value)
    assert pages(spark, warehouse, "clicked_pages") == [1, None]
    for table in ("customer_facing_data", "checked_totals"):
        written = (warehouse / table / "_delta_log").exists()
        assert not written or rows(spark, warehouse / table) == [], table
