"""`dp.create_sink`: rows an append flow sends out of the pipeline arrive, exactly once across
updates and crashes, as they do into a streaming table.

Databricks' reference (https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-sink and
https://docs.databricks.com/aws/en/ldp/sinks): a `delta` sink by `path` or by a fully qualified
`tableName`, a `kafka` sink by `kafka.bootstrap.servers` and `topic` (the flow's rows carry
`value`, and may carry `key`, `headers` and `partition`); fed by `@dp.append_flow` only; a full
refresh does not clear a sink, and rows read again are appended to it; expectations are not
supported on a sink.
"""

from __future__ import annotations

import json
import uuid
from textwrap import dedent

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from test_cli_dry_run import dry_run, pipeline_dir
from test_crash_recovery import half_created_table
from test_declaration_errors import expected

from exactly_once.errors import FlowError
from exactly_once.kafka import sink_transactions
from exactly_once.kafka.admin import ensure_topics
from exactly_once.local.execution import sinks
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.storage import delta_log

HEADER = "from pyspark import pipelines as dp\n"


def write_ids(spark, path, ids: list[int]) -> None:
    spark.createDataFrame([(i,) for i in ids], "id BIGINT").write.format("delta") \
        .mode("append").save(str(path))


class SinkPipeline:
    """One pipeline file `sinks.py`: `text` formatted with the live source's path."""

    def __init__(self, spark, settings, root, text: str, **paths: str):
        self.spark, self.settings = spark, settings
        self.live = root / "live"
        self.files = pipeline_dir(root, sinks=HEADER + dedent(text).format(
            live=str(self.live), **paths))
        self.warehouse = root / "warehouse"

    def run(self, **kwargs):
        return run_pipeline(self.spark, self.settings, self.warehouse, pipelines_dir=self.files,
                            **kwargs)


# -- Delta sinks -----------------------------------------------------------------------------------
DELTA_SINKS = '''
dp.create_sink("audit", "delta", {{"path": {audit!r}}})
dp.create_sink("audit_table", "delta", {{"tableName": "audit_db.audited"}})

@dp.append_flow(target="audit", once=True)
def seed():
    return spark.createDataFrame([(0, "seed")], "id BIGINT, note STRING")

@dp.append_flow(target="audit")
def to_audit():
    return spark.readStream.format("delta").load({live!r}).selectExpr("id", "'seen' AS note")

@dp.append_flow(target="audit_table")
def to_audit_table():
    return spark.readStream.format("delta").load({live!r})
'''


@pytest.fixture(scope="module")
def delta_sinks(spark, settings, tmp_path_factory):
    """The pipeline, then what each step left in both sinks (ids, sorted)."""
    root = tmp_path_factory.mktemp("delta-sinks")
    audit = root / "audit"
    pipeline = SinkPipeline(spark, settings, root, DELTA_SINKS, audit=str(audit))
    table = pipeline.warehouse / "_sinks" / "audit_db.audited"
    seen = {}

    def ids(path):
        return sorted(r.id for r in spark.read.format("delta").load(str(path)).collect())

    write_ids(spark, pipeline.live, [1, 2])
    # Killed while Delta created each sink's table in an earlier run (test_crash_recovery.py):
    # a log with no committed version, a data file no commit names.
    half_created_table(audit, stray_data=True)
    half_created_table(table, stray_data=True)
    # Killed after each sink's commit, before Structured Streaming commits the batch: the next
    # update replays it.
    append = sinks.idempotent.append

    def append_then_die(*args, **kwargs):
        append(*args, **kwargs)
        raise RuntimeError("killed after the sink's commit")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sinks.idempotent, "append", append_then_die)
        with pytest.raises(FlowError, match="killed"):
            pipeline.run()
    seen["killed"] = (ids(audit), ids(table))
    seen["replayed"] = pipeline.run()
    seen["after the replay"] = (ids(audit), ids(table), delta_log.latest_version(table))
    seen["by name"] = sorted(r.id for r in spark.table("audit_db.audited").collect())
    write_ids(spark, pipeline.live, [3])
    pipeline.run()
    seen["next update"] = (ids(audit), ids(table))
    seen["full refresh"] = pipeline.run(full_refresh=True)
    seen["after a full refresh"] = (ids(audit), ids(table))
    return seen


def test_a_delta_sink_by_path_or_table_name_receives_the_rows(delta_sinks):
    # Both created over what a kill during their creation left; the once flow `seed` (before
    # `to_audit`) and `to_audit_table` committed, then killed.
    assert delta_sinks["killed"] == ([0], [1, 2])
    assert delta_sinks["after the replay"][:2] == ([0, 1, 2], [1, 2])  # nothing written twice
    assert delta_sinks["after the replay"][2] == 0  # one commit: the table sink's first
    assert delta_sinks["by name"] == [1, 2]
    assert delta_sinks["next update"] == ([0, 1, 2, 3], [1, 2, 3])
    flows = {f.flow: (f.kind, f.target, f.output_rows) for f in delta_sinks["replayed"].flows}
    assert flows == {"seed": ("append_once", "audit", 0), "to_audit": ("sink", "audit", 2),
                     "to_audit_table": ("sink", "audit_table", 0)}


def test_a_full_refresh_keeps_a_sink_s_rows_and_appends_what_it_reads_again(delta_sinks):
    # The once flow `seed` runs again too.
    assert delta_sinks["after a full refresh"] == ([0, 0, 1, 1, 2, 2, 3, 3], [1, 1, 2, 2, 3, 3])


# -- what is refused at load -----------------------------------------------------------------------
def sink_file(declaration: str, decorators: str = '@dp.append_flow(target="out")'
              ) -> dict[str, str]:
    return {"out": HEADER + f"""
{declaration}

{decorators}
def to_out():
    return spark.readStream.format("rate").load()
"""}


REFUSED = {
    "a format of no kind": (
        sink_file('dp.create_sink("out", "parquet", {"path": "/tmp/x"})'), "out", "out",
        "create_sink: format must be 'delta' or 'kafka', got 'parquet'"),
    "a delta sink with no place": (
        sink_file('dp.create_sink("out", "delta", {})'), "out", "out",
        "create_sink: a delta sink takes option `path` or `tableName`"),
    "a delta sink with two places": (
        sink_file('dp.create_sink("out", "delta", {"path": "/tmp/x", "tableName": "a.b"})'),
        "out", "out", "create_sink: a delta sink takes option `path` or `tableName`, not both"),
    "a table name that is not qualified": (
        sink_file('dp.create_sink("out", "delta", {"tableName": "audited"})'), "out", "out",
        "create_sink: tableName must be fully qualified (<schema>.<table> or "
        "<catalog>.<schema>.<table>), got 'audited'"),
    "an option the runtime writes itself": (
        sink_file('dp.create_sink("out", "delta", {"path": "/tmp/x", "txnVersion": "1"})'),
        "out", "out", "create_sink: option `txnVersion` is the runtime's own (the sink's writes "
        "are made idempotent by it)"),
    "a kafka sink with no topic": (
        sink_file('dp.create_sink("out", "kafka", {"kafka.bootstrap.servers": "h:9092"})'),
        "out", "out",
        "create_sink: a kafka sink needs options `kafka.bootstrap.servers` and `topic`"),
    "a kafka option the client does not know": (
        sink_file('dp.create_sink("out", "kafka", {"kafka.bootstrap.servers": "h:9092", '
                  '"topic": "t", "kafka.no.such.setting": "1"})'), "out", "out",
        "create_sink: option `kafka.no.such.setting` is not a setting of the local Kafka "
        "client (librdkafka): No such configuration property: \"no.such.setting\""),
    "a kafka option that is not kafka.*": (
        sink_file('dp.create_sink("out", "kafka", {"kafka.bootstrap.servers": "h:9092", '
                  '"topic": "t", "startingOffsets": "earliest"})'), "out", "out",
        "create_sink: option `startingOffsets` is not an option of a kafka sink (`topic`, "
        "`kafka.*`)"),
    "expectations on a sink": (
        sink_file('dp.create_sink("out", "delta", {"path": "/tmp/x"})',
                  '@dp.append_flow(target="out")\n@dp.expect("positive", "value > 0")'),
        "out", "out", "expectations are not supported on a sink: flow `to_out` writes sink "
        "`out`"),
    "AUTO CDC into a sink": (
        {"changes": HEADER + dedent("""
            @dp.table(name="changes")
            def changes():
                return spark.readStream.format("rate").load()
            """), "out": HEADER + dedent("""
            dp.create_sink("out", "delta", {"path": "/tmp/x"})
            dp.create_auto_cdc_flow(target="out", source="changes", keys=["value"],
                                    sequence_by="timestamp")
            """)}, "out", "out",
        "sink `out` takes append flows only (@dp.append_flow); AUTO CDC flow `out` writes it"),
}


@pytest.mark.parametrize("files, file, dataset, message",
                         [pytest.param(*case, id=name) for name, case in REFUSED.items()])
def test_what_a_sink_does_not_support_is_refused_at_load(in_session, tmp_path, capsys, files,
                                                         file, dataset, message):
    root = pipeline_dir(tmp_path, **files)
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [expected(root, file, dataset, message)])


def test_rows_a_kafka_sink_cannot_send_are_refused_by_dry_run(in_session, tmp_path, capsys):
    """The rate source's `value` is a number: Kafka takes a string or bytes."""
    root = pipeline_dir(tmp_path, **sink_file(
        'dp.create_sink("out", "kafka", {"kafka.bootstrap.servers": "h:9092", "topic": "t"})'))
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [expected(
        root, "out", "out", "kafka sink `out`: column `value` of flow `to_out` must be a string "
        "or binary, got bigint")])


# -- the Kafka sink, against the real broker -------------------------------------------------------
KAFKA_SINK = '''
from pyspark.sql import functions as F

dp.create_sink("out", "kafka", {{"kafka.bootstrap.servers": {bootstrap!r}, "topic": {topic!r}}})

@dp.append_flow(target="out")
def to_out():
    rows = spark.readStream.format("delta").load({live!r})
    return rows.select(
        F.col("id").cast("string").alias("key"),
        F.to_json(F.struct("id")).alias("value"),
        F.array(F.struct(F.lit("source").alias("key"),
                         F.lit("test").cast("binary").alias("value"))).alias("headers"),
        (F.col("id") % 2).cast("int").alias("partition"))
'''


def consume(bootstrap: str, topic: str, isolation: str) -> list[tuple]:
    """Every record of `topic` a consumer in `isolation` reads: (partition, key, value, headers),
    sorted."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": isolation})
    partitions = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records, at_end = [], set()
    try:
        while len(at_end) < partitions:
            message = consumer.poll(5)
            assert message is not None, "the topic did not reach its end"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            records.append((message.partition(), message.key().decode(),
                            json.loads(message.value()), message.headers()))
    finally:
        consumer.close()
    return sorted(records)


def sent(ids: list[int]) -> list[tuple]:
    return sorted((i % 2, str(i), {"id": i}, [("source", b"test")]) for i in ids)


@pytest.mark.kafka
def test_a_kafka_sink_sends_each_row_once_across_crashes_before_and_after_its_commit(
        spark, settings, tmp_path, kafka_broker, monkeypatch):
    bootstrap, topic = kafka_broker.bootstrap, f"sink-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, {topic: 2})
    pipeline = SinkPipeline(spark, settings, tmp_path, KAFKA_SINK, bootstrap=bootstrap,
                            topic=topic)
    commit = sink_transactions.TransactionalBatches.commit

    def die_before_commit(self):  # the records reached the broker; the transaction is open
        self.producer.flush()
        raise RuntimeError("killed before the transaction's commit")

    def die_after_commit(self):
        commit(self)
        raise RuntimeError("killed after the transaction's commit")

    write_ids(spark, pipeline.live, [1, 2, 3])
    monkeypatch.setattr(sink_transactions.TransactionalBatches, "commit", die_before_commit)
    with pytest.raises(FlowError, match="killed"):
        pipeline.run()
    monkeypatch.setattr(sink_transactions.TransactionalBatches, "commit", die_after_commit)
    with pytest.raises(FlowError, match="killed"):
        pipeline.run()  # the open transaction aborted, the batch sent again and committed
    monkeypatch.setattr(sink_transactions.TransactionalBatches, "commit", commit)
    result = pipeline.run()  # the replay finds its marker: nothing sent again
    assert [(f.flow, f.kind, f.output_rows) for f in result.flows] == [("to_out", "sink", 0)]
    assert consume(bootstrap, topic, "read_committed") == sent([1, 2, 3])
    # The aborted attempt's records are in the log: only a read_committed consumer skips them.
    assert consume(bootstrap, topic, "read_uncommitted") == sorted(sent([1, 2, 3]) * 2)

    write_ids(spark, pipeline.live, [4])
    result = pipeline.run()
    assert [f.output_rows for f in result.flows] == [1]
    assert consume(bootstrap, topic, "read_committed") == sent([1, 2, 3, 4])


@pytest.mark.kafka
def test_a_kafka_sink_to_a_topic_the_broker_lacks_is_one_line(spark, settings, tmp_path,
                                                            kafka_broker):
    pipeline = SinkPipeline(spark, settings, tmp_path, KAFKA_SINK,
                            bootstrap=kafka_broker.bootstrap, topic="no-such-topic")
    write_ids(spark, pipeline.live, [1])
    with pytest.raises(FlowError) as failure:
        pipeline.run()
    assert str(failure.value) == (
        f"flow `to_out` failed: kafka sink `out`: topic `no-such-topic` does not exist at "
        f"{kafka_broker.bootstrap}")
