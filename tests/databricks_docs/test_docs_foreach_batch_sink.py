"""The ForEachBatch sink: `@dp.foreach_batch_sink` declares a function called with each micro-batch
of the append flows that target it, and the batch's id. The flow's checkpoint is the pipeline's:
ids go on across updates, a batch a failure interrupted is given again with the same id (the
guarantee is at-least-once: the function deduplicates by batch id), and a full refresh starts
the ids from 0 again.

Pages:
- foreach_batch_sink: "batch_id: The integer ID of the micro-batch. Spark increments this ID
  for each trigger interval. A batch_id of 0 represents the start of a stream, or the beginning
  of a full refresh": https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-foreach-batch-sink
- Use ForEachBatch to write to arbitrary data sinks in pipelines ("Pipelines manage checkpoints
  on a per-flow basis, so checkpoints reset automatically when you perform a full refresh"):
  https://docs.databricks.com/aws/en/ldp/for-each-batch
- foreachBatch "provides only at-least-once write guarantees. However, you can use the batchId
  provided to the function as way to deduplicate the output":
  https://docs.databricks.com/aws/en/structured-streaming/foreach
"""

from __future__ import annotations

import pytest
from docs_corpus import dp_file, json_files, pipeline, refusal, rows, run

from exactly_once.errors import FlowError

FOREACH_BATCH_SINK = ("https://docs.databricks.com/aws/en/ldp/developer/"
                      "ldp-python-ref-foreach-batch-sink")


def test_the_function_gets_each_batch_and_its_id_across_updates(spark, settings, tmp_path):
    """FOREACH_BATCH_SINK's handler appends each batch, with its id, to a Delta table: one
    batch an update, ids 0 then 1; a handler that fails in batch 2 is given batch 2 again by the
    next update, the same rows; a full refresh starts again at batch 0."""
    events = json_files(tmp_path / "events", a=[{"id": 1}, {"id": 2}])
    out, fail_once = tmp_path / "out", tmp_path / "fail_once"
    root = pipeline(tmp_path, sink=dp_file(f'''
        import os

        @dp.foreach_batch_sink(name="my_sink")
        def batch_handler(df, batch_id):
          if os.path.exists("{fail_once}"):
            os.remove("{fail_once}")
            raise RuntimeError("the downstream system is down")
          (df.withColumn("batch_id", F.lit(batch_id))
             .write.format("delta").mode("append").save("{out}"))

        @dp.append_flow(target="my_sink")
        def to_sink():
          return spark.readStream.format("json").schema("id BIGINT").load("{events}")
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    json_files(events, b=[{"id": 3}])
    run(spark, settings, root, warehouse)
    assert rows(spark, out) == [(1, 0), (2, 0), (3, 1)]

    json_files(events, c=[{"id": 4}])
    fail_once.touch()
    with pytest.raises(FlowError, match="the downstream system is down"):
        run(spark, settings, root, warehouse)
    run(spark, settings, root, warehouse)
    assert rows(spark, out) == [(1, 0), (2, 0), (3, 1), (4, 2)]

    run(spark, settings, root, warehouse, full_refresh=True)
    assert rows(spark, out, "batch_id") == [(0,), (0,), (0,), (0,), (0,), (0,), (1,), (2,)]


def test_a_once_flow_into_a_foreach_batch_sink_is_one_line(in_session, tmp_path, capsys):
    """FOR_EACH_BATCH: the sink "is designed for streaming queries, such as append_flow. It is
    not intended for batch-only pipelines"."""
    root = pipeline(tmp_path, sink=dp_file('''
        @dp.foreach_batch_sink()
        def my_sink(df, batch_id):
          pass

        @dp.append_flow(target="my_sink", once=True)
        def backfill():
          return spark.range(3)
        '''))
    refusal(root, capsys, "sink", "my_sink", ["backfill", "foreach_batch_sink", "stream"])
