"""Event hooks: Python functions of the pipeline called with each event the update writes to its
event log, as a dictionary. A hook that raises has failed; after more consecutive failures than
its `max_allowable_consecutive_failures` it is disabled for the rest of the update. A hook never
fails the update, and what the hooks did is in the event log as `hook_progress` events, for
which no hook is called.

Page: "Define custom monitoring of pipelines with event hooks" ("Any event hooks defined in a
pipeline will attempt to process all events generated during each pipeline update";
`@dp.on_event_hook(max_allowable_consecutive_failures=None)`, "an integer greater than or equal
to 0 or None"; "Event hooks are not triggered for hook_progress events"):
https://docs.databricks.com/aws/en/ldp/event-hooks
"""

from __future__ import annotations

import json

import pytest
from docs_corpus import delta, dp_file, pipeline, refusal, rows, run

EVENT_HOOKS = "https://docs.databricks.com/aws/en/ldp/event-hooks"


def test_hooks_see_every_event_and_a_failing_one_is_disabled(spark, settings, tmp_path):
    """EVENT_HOOKS: `record` gets every event of the update (the event log's rows but its
    hook_progress ones), with its fields; `flaky` raises each time and, allowed 1 consecutive
    failure, is called twice and disabled; the update's tables are written all the same."""
    seen, flaky_calls = tmp_path / "seen.jsonl", tmp_path / "flaky.txt"
    root = pipeline(tmp_path, hooks=dp_file(f'''
        import json

        @dp.materialized_view
        def numbers():
          return spark.range(3)

        @dp.materialized_view
        def doubled():
          return spark.read.table("numbers").select((F.col("id") * 2).alias("id"))

        @dp.on_event_hook
        def record(event):
          with open("{seen}", "a") as out:
            out.write(json.dumps({{"id": event["id"], "type": event["event_type"],
                                   "flow": event["origin"]["flow_name"]}}) + "\\n")

        @dp.on_event_hook(max_allowable_consecutive_failures=1)
        def flaky(event):
          with open("{flaky_calls}", "a") as out:
            out.write(event["event_type"] + "\\n")
          raise RuntimeError("the alerting service is down")
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    assert rows(spark, warehouse / "doubled") == [(0,), (2,), (4,)]

    log = delta(spark, warehouse / "event_log")
    written = {r["id"]: (r["event_type"], r["origin"]["flow_name"])
               for r in log.where("event_type != 'hook_progress'").collect()}
    events = [json.loads(line) for line in seen.read_text().splitlines()]
    assert {e["id"]: (e["type"], e["flow"]) for e in events} == written
    assert len(events) == len(written)
    assert {"numbers", "doubled"} <= {flow for kind, flow in written.values()
                                      if kind == "flow_progress"}
    assert len(flaky_calls.read_text().splitlines()) == 2

    progress = {r["details"]["hook_progress"]["name"]: r
                for r in log.where("event_type = 'hook_progress'").collect()}
    assert set(progress) == {"record", "flaky"}
    assert progress["record"]["details"]["hook_progress"]["status"] == "COMPLETED"
    assert progress["record"]["details"]["hook_progress"]["events_processed"] == len(written)
    disabled = progress["flaky"]
    assert disabled["details"]["hook_progress"]["status"] == "DISABLED"
    assert disabled["details"]["hook_progress"]["failures"] == 2
    assert "the alerting service is down" in disabled["error"]["message"]


@pytest.mark.parametrize("value", ["-1", "'3'"])
def test_a_limit_that_is_not_a_count_is_one_line(in_session, tmp_path, capsys, value):
    """EVENT_HOOKS: max_allowable_consecutive_failures "must be an integer greater than or
    equal to 0 or None"."""
    root = pipeline(tmp_path, hooks=dp_file(f'''
        @dp.materialized_view
        def numbers():
          return spark.range(3)

        @dp.on_event_hook(max_allowable_consecutive_failures={value})
        def alert(event):
          pass
        '''))
    refusal(root, capsys, "hooks", "alert", ["max_allowable_consecutive_failures"])
