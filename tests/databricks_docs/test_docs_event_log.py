"""The event log records every flow of an update, the ones that fail included: a `flow_progress`
event with status FAILED, level ERROR and the error, also for a flow that stops while its query
is being built (Auto Loader's stop when files bring new columns, under the default schema
evolution mode `addNewColumns`); the flows that did not fail complete.

Pages:
- Pipeline event log, `flow_progress` events and their status (FAILED):
  https://docs.databricks.com/aws/en/ldp/monitor-event-logs
- Auto Loader schema evolution, `addNewColumns`: "Stream fails. New columns are added to the
  schema": https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/schema
"""

from __future__ import annotations

import pytest
from docs_corpus import delta, dp_file, json_files, pipeline, run

from exactly_once.errors import SchemaEvolvedError

EVENT_LOG = "https://docs.databricks.com/aws/en/ldp/monitor-event-logs"
SCHEMA_EVOLUTION = ("https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/"
                    "auto-loader/schema")


def test_a_flow_that_stops_while_its_query_is_built_has_its_failed_event(spark, settings,
                                                                          tmp_path):
    """SCHEMA_EVOLUTION: a file with a new column stops the stream; EVENT_LOG: that update's
    `flow_progress` event of the flow is FAILED with the error, the other flow's COMPLETED."""
    data = json_files(tmp_path / "in", a=[{"id": 1}])
    root = pipeline(tmp_path, ingest=dp_file(f'''
        @dp.table
        def raw_events():
          return (spark.readStream.format("cloudFiles")
                  .option("cloudFiles.format", "json")
                  .load("{data}"))

        @dp.materialized_view
        def numbers():
          return spark.range(3)
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    json_files(data, b=[{"id": 2, "color": "red"}])
    with pytest.raises(SchemaEvolvedError, match="flow `raw_events` failed"):
        run(spark, settings, root, warehouse)
    log = delta(spark, warehouse / "event_log").where("event_type = 'flow_progress'")
    last = log.orderBy("sequence.control_plane_seq_no").collect()[-1]["origin"]["update_id"]
    events = {r["origin"]["flow_name"]: r for r in log.where(
        f"origin.update_id = '{last}'").collect()}
    failed = events["raw_events"]
    assert failed["details"]["flow_progress"]["status"] == "FAILED"
    assert failed["level"] == "ERROR"
    assert "UNKNOWN_FIELD_EXCEPTION" in failed["error"]["message"]
    assert "[color]" in failed["error"]["message"]
    assert events["numbers"]["details"]["flow_progress"]["status"] == "COMPLETED"
