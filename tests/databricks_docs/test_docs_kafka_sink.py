"""A Kafka sink as Databricks documents it, against the session's local broker: each row of the
source table arrives on the topic once across updates.

Pages:
- create_sink: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-sink
- sinks (the Kafka example): https://docs.databricks.com/aws/en/ldp/ldp-sinks
"""

from __future__ import annotations

import json
import uuid

import pytest
from docs_corpus import dp_file, json_files, pipeline, run

from exactly_once.kafka.admin import ensure_topics

pytestmark = pytest.mark.kafka

SINKS = "https://docs.databricks.com/aws/en/ldp/ldp-sinks"


def test_a_kafka_sink_receives_each_row_once(spark, settings, kafka_broker, tmp_path):
    """SINKS: `create_sink(name, "kafka", {"kafka.bootstrap.servers", "topic"})` and an append
    flow of `value` (and `key`) columns: two updates, three clicks, three records."""
    topic = f"docs-corpus-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_broker.bootstrap, {topic: 1})
    inbox = json_files(tmp_path / "inbox", a=[{"page": 1}, {"page": 2}])
    root = pipeline(tmp_path, sink=dp_file(f'''
        dp.create_sink(
          name = "my_kafka_sink",
          format = "kafka",
          options = {{
            "kafka.bootstrap.servers": "{kafka_broker.bootstrap}",
            "topic": "{topic}"
          }}
        )

        @dp.table
        def clicks():
          return spark.readStream.format("json").schema("page BIGINT").load("{inbox}")

        @dp.append_flow(name = "kafka_sink_flow", target = "my_kafka_sink")
        def kafka_sink_flow():
          return (
            spark.readStream.table("clicks")
              .select(F.col("page").cast("string").alias("key"),
                      F.to_json(F.struct("*")).alias("value"))
          )
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    json_files(inbox, b=[{"page": 3}])
    run(spark, settings, root, warehouse)
    records = (spark.read.format("kafka")
               .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
               .option("subscribe", topic).load()
               .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
               .collect())
    assert sorted((r["key"], json.loads(r["value"])) for r in records) == [
        ("1", {"page": 1}), ("2", {"page": 2}), ("3", {"page": 3})]
