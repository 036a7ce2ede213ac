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


def test_a_merge_runs_without_adaptive_execution_and_gives_the_session_its_settings_back(
        spark, tmp_path):
    """The MERGE runs with the runtime's settings (its marker, its source read as it is,
    adaptive execution off: a batch's few keys, whose stages adaptive execution made a Spark job
    each), then the session has its own again: a value a pipeline's configuration set comes
    back, an unset one stays unset."""
    from delta.tables import DeltaTable

    from exactly_once.local.storage.idempotent import ADAPTIVE, MATERIALIZE_SOURCE, USER_METADATA

    path = str(tmp_path / "target")
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta") \
        .save(path)
    session = spark.newSession()  # as a streaming query's own
    session.conf.set(MATERIALIZE_SOURCE, "auto")  # the pipeline's own choices
    session.conf.set(ADAPTIVE, "true")
    seen: dict[str, str | None] = {}

    class Merge:  # Delta's builder, noting the settings it runs under
        def __init__(self):
            source = session.createDataFrame([(2, "B"), (3, "c")], "id INT, v STRING")
            self.builder = DeltaTable.forPath(session, path).alias("t") \
                .merge(source.localCheckpoint().alias("s"), "t.id = s.id") \
                .whenMatchedUpdateAll().whenNotMatchedInsertAll()

        def execute(self):
            seen.update({k: session.conf.get(k, None)
                         for k in (USER_METADATA, MATERIALIZE_SOURCE, ADAPTIVE)})
            self.builder.execute()

    marker = Marker(f"{uuid.uuid4()}:orders:target", 0)
    assert idempotent.merge(session, Merge(), path, marker, replayed=False)
    assert seen == {USER_METADATA: marker.user_metadata(), MATERIALIZE_SOURCE: "none",
                    ADAPTIVE: "false"}
    assert {k: session.conf.get(k, None) for k in (USER_METADATA, MATERIALIZE_SOURCE,
                                                   ADAPTIVE)} == \
        {USER_METADATA: None, MATERIALIZE_SOURCE: "auto", ADAPTIVE: "true"}
    assert sorted(tuple(r) for r in spark.read.format("delta").load(path).collect()) == \
        [(1, "a"), (2, "B"), (3, "c")]
    assert not idempotent.merge(session, Merge(), path, marker, replayed=True)
