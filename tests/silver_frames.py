"""Silver's transforms on small DataFrames, without the runtime: records as bronze holds them
(`kafka_rows`), and the events the pipeline's `checked_<topic>` view passes on
(`checked_events`)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.settings.pipeline import TopicSettings
from exactly_once.transforms.bronze import with_ingestion_time
from exactly_once.transforms.silver import rule_verdicts, well_formed_events

KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT, "
                "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
KAFKA_NOW = datetime(2026, 11, 21, tzinfo=timezone.utc)  # kafka_rows' default broker timestamp


def kafka_rows(spark: SparkSession, records: list[tuple[str, str | None, object]],
               first_offset: int = 0, timestamp: datetime = KAFKA_NOW) -> DataFrame:
    """(topic, key, payload) triples as bronze stores them: as Kafka delivered them, ingested now.

    A dict payload is sent as JSON; a str payload is sent as is (for malformed values), a bytes
    payload byte for byte (for values that are not UTF-8), None as a NULL value. `timestamp` is
    the records' Kafka (broker) timestamp.
    """
    rows = []
    for i, (topic, key, payload) in enumerate(records):
        value = payload if isinstance(payload, (bytes, type(None))) else \
            (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        rows.append((None if key is None else key.encode(), value, topic, 0,
                     first_offset + i, timestamp, 0, []))
    return with_ingestion_time(spark.createDataFrame(rows, KAFKA_SCHEMA))


def checked_events(parsed: DataFrame, topic: TopicSettings) -> DataFrame:
    """What the pipeline's `checked_<topic>` view passes on to silver, without the runtime: the
    well-formed events that `@dp.expect_all_or_drop(rule_verdicts(topic))` keeps (a constraint
    that is false or NULL drops the row)."""
    checked = well_formed_events(parsed, topic)
    for constraint in rule_verdicts(topic).values():
        checked = checked.where(F.coalesce(F.expr(constraint), F.lit(False)))
    return checked
