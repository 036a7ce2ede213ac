"""A replayed micro-batch is written once, whichever version of the runtime committed it first."""

from __future__ import annotations

import uuid

from exactly_once.local.storage import idempotent
from exactly_once.local.storage.delta_log import Marker, row_count


def test_a_replayed_batch_that_committed_is_not_written_again(spark, tmp_path):
    path = tmp_path / "table"
    writer = f"{uuid.uuid4()}:silver_orders"
    batch = spark.range(3)
    assert idempotent.append(batch, path, Marker(writer, 0), replayed=False)
    assert not idempotent.append(batch, path, Marker(writer, 0), replayed=True)
    assert idempotent.append(batch, path, Marker(writer, 1), replayed=True)  # never committed
    assert row_count(path) == 6


def test_batches_committed_before_commit_markers_existed_count(spark, tmp_path):
    """A warehouse written by the runtime before commit markers (8b288b4 and older) marked its
    batches as Delta does: an append flow through Delta's streaming sink (`txn` appId = the
    query's id), an AUTO CDC write with `txnAppId` = query id, flow and role. A crash there,
    then an upgrade: the replayed batch finds those and is not applied twice."""
    query_id = str(uuid.uuid4())
    for app_id, writer in ((query_id, f"{query_id}:silver_orders"),
                           (f"{query_id}:orders:target", f"{query_id}:orders:target")):
        path = tmp_path / writer.replace(":", "_")
        spark.range(3).write.format("delta").option("txnAppId", app_id) \
            .option("txnVersion", 4).save(str(path))
        assert not idempotent.append(spark.range(3), path, Marker(writer, 4), replayed=True)
        assert not idempotent.append(spark.range(3), path, Marker(writer, 3), replayed=True)
        assert idempotent.append(spark.range(3), path, Marker(writer, 5), replayed=True)
        assert row_count(path) == 6
