"""A pipeline written with the legacy `dlt` module, as pipelines written before 2025 are, and the
`LIVE.` prefix: Databricks still runs them, with the same meaning as `pyspark.pipelines`. The
users are the CDC page's example feed, so the tables hold what that page says.

Pages:
- "What happened to @dlt?" and the DLT / SDP syntax table:
  https://docs.databricks.com/aws/en/ldp/developer/python-ref
- create_streaming_table ("The create_target_table() and create_streaming_live_table()
  functions are deprecated"): https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-streaming-table
- temporary_view ("The older dlt module used the @view decorator"):
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-view
- LIVE schema (legacy): https://docs.databricks.com/aws/en/ldp/live-schema
- the feed and its SCD results: https://docs.databricks.com/aws/en/ldp/cdc
"""

from __future__ import annotations

from docs_corpus import json_files, pipeline, rows, run
from test_docs_auto_cdc import FEED, USERS, records

from exactly_once.table_properties import TOMBSTONE_GC_NEVER_SECONDS

KEPT = TOMBSTONE_GC_NEVER_SECONDS
PYTHON_REF = "https://docs.databricks.com/aws/en/ldp/developer/python-ref"
LIVE_SCHEMA = "https://docs.databricks.com/aws/en/ldp/live-schema"


def test_a_legacy_dlt_pipeline_runs_as_its_pyspark_pipelines_twin(spark, settings, tmp_path):
    """PYTHON_REF: @dlt.table over a stream is a streaming table, over a batch read a
    materialized view; @dlt.view a view; dlt.read / dlt.read_stream read pipeline datasets;
    dlt.apply_changes and dlt.apply_changes_from_snapshot are AUTO CDC; @dlt.expect_or_drop,
    @dlt.append_flow and dlt.create_sink as their dp twins. LIVE_SCHEMA: `LIVE.<dataset>`
    reads the pipeline's dataset."""
    feed = json_files(tmp_path / "feed", users=records(*FEED))
    sink = tmp_path / "legacy_sink"
    root = pipeline(tmp_path, users=f'''
        import dlt
        from pyspark.sql.functions import col, expr

        @dlt.table(comment="The CDC feed of users")
        def users_raw():
          return spark.readStream.format("json").schema("{USERS}").load("{feed}")

        @dlt.view
        def users():
          return dlt.read_stream("users_raw")

        # The runtime's one addition (docs/guarantees.md, AUTO CDC: an SCD1 table over the
        # changes an SCD2 table keeps whole must keep its tombstones too, or dry-run refuses
        # the pair).
        dlt.create_streaming_table("users_current", table_properties={{
          "pipelines.cdc.tombstoneGCThresholdInSeconds": "{KEPT}"}})
        dlt.apply_changes(
          target = "users_current",
          source = "users",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = 1
        )

        dlt.create_target_table("users_history")
        dlt.apply_changes(
          target = "users_history",
          source = "users",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = "2"
        )

        @dlt.table
        @dlt.expect_or_drop("known_city", "city <> 'Cancun'")
        def cities():
          return dlt.read("users_current").groupBy("city").count()

        @dlt.table
        def current_users():
          return spark.read.table("LIVE.users_current")

        dlt.create_streaming_live_table("audit")

        @dlt.append_flow(target = "audit")
        def audit_flow():
          return spark.readStream.table("LIVE.users_raw").select("userId", "operation")

        dlt.create_sink("legacy_sink", "delta", {{"path": "{sink}"}})

        @dlt.append_flow(name = "legacy_sink_flow", target = "legacy_sink")
        def legacy_sink_flow():
          return dlt.read_stream("users_raw").select("userId")

        def next_snapshot_and_version(latest_snapshot_version):
          if latest_snapshot_version is None:
            return (spark.createDataFrame(
                      [(124, "Raul", "Oaxaca"), (125, "Mercedes", "Guadalajara"),
                       (126, "Lily", "Cancun")], "userId BIGINT, name STRING, city STRING"), 1)
          return None

        dlt.create_streaming_table("users_snapshot")
        dlt.apply_changes_from_snapshot(
          target = "users_snapshot",
          source = next_snapshot_and_version,
          keys = ["userId"],
          stored_as_scd_type = 1
        )
        ''')
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    current = [(124, "Raul", "Oaxaca"), (125, "Mercedes", "Guadalajara"),
               (126, "Lily", "Cancun")]
    assert rows(spark, warehouse / "users_current", "userId", "name", "city") == current
    assert len(rows(spark, warehouse / "users_history")) == 7  # CDC, the SCD type 2 result
    assert rows(spark, warehouse / "cities") == [("Guadalajara", 1), ("Oaxaca", 1)]
    assert rows(spark, warehouse / "current_users", "userId", "name", "city") == current
    assert len(rows(spark, warehouse / "audit")) == len(FEED)
    assert sorted(u for u, in rows(spark, sink, "userId")) == sorted(u for u, *_ in FEED)
    assert rows(spark, warehouse / "users_snapshot", "userId", "name", "city") == current
