"""Silver: parse and validate events per topic, quarantine bad records, drop redeliveries."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from exactly_once.config import TopicSettings

MALFORMED_JSON = "malformed_json"
# Where each event came from, kept next to it: its Kafka coordinates (the offset also breaks
# sequence ties) and when bronze ingested it (the arrival time lateness is measured against).
LINEAGE = ["kafka_partition", "kafka_offset", "kafka_timestamp", "ingested_at"]
QUARANTINE_COLUMNS = ["source_topic", "kafka_topic", "kafka_partition", "kafka_offset",
                      "kafka_timestamp", "kafka_key", "value", "errors", "reason", "quarantined_at"]


def event_schema(topic: TopicSettings) -> StructType:
    return StructType.fromDDL(topic.schema)


def rule_failures(rules: dict[str, str]) -> list[Column]:
    """One column per rule: the rule's name where the row breaks it (false or NULL), else NULL."""
    return [F.when(~F.coalesce(F.expr(sql), F.lit(False)), F.lit(name)) for name, sql in
            rules.items()]


def parse_events(bronze: DataFrame, topic: TopicSettings) -> DataFrame:
    """The topic's records with typed event fields and `errors`: every check the record fails.

    The value is parsed twice: with the contract's types (strict JSON typing: a quoted "42" is
    not a BIGINT) and as text. A field present as text but NULL when typed has the wrong type,
    and is named (`invalid_sequence`) instead of silently becoming NULL. A value that is not a
    JSON object fails only `malformed_json`: checking its fields would just repeat that.
    """
    schema = event_schema(topic)
    as_text = StructType([StructField(f.name, StringType()) for f in schema])
    value = F.col("value").cast("string")
    records = bronze.where(F.col("topic") == topic.topic).select(
        F.col("key").cast("string").alias("kafka_key"),
        value.alias("value"),
        F.json_object_keys(value).isNotNull().alias("_is_json_object"),
        F.from_json(value, as_text).alias("_raw"),
        F.from_json(value, schema).alias("_typed"),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        "ingested_at",
    )
    typed = records.select("*", *[F.col(f"_typed.`{f.name}`").alias(f.name) for f in schema])
    type_errors = [F.when(F.col(f"_raw.`{f.name}`").isNotNull() & F.col(f.name).isNull(),
                          F.lit(f"invalid_{f.name}")) for f in schema]
    checks = F.array(*type_errors, *rule_failures(dict(topic.rules)))
    errors = F.when(~F.col("_is_json_object"), F.array(F.lit(MALFORMED_JSON))).otherwise(
        F.filter(checks, lambda e: e.isNotNull()))
    return typed.withColumn("errors", errors).drop("_is_json_object", "_raw", "_typed")


def well_formed_events(parsed: DataFrame, topic: TopicSettings) -> DataFrame:
    """Events whose value parsed into the contract's types, whatever the rules say of them.

    The pipeline checks the rules on these as expectations, so failures are counted per rule.
    """
    fields = [f.name for f in event_schema(topic)]
    parse_errors = F.array_except("errors", F.array(*[F.lit(name) for name in topic.rules]))
    return parsed.where(F.size(parse_errors) == 0).select(*fields, "kafka_key", *LINEAGE)


def silver_columns(events: DataFrame, topic: TopicSettings) -> DataFrame:
    """The event's contract fields and its lineage: what a silver table stores."""
    return events.select(*[f.name for f in event_schema(topic)], *LINEAGE)


def valid_events(parsed: DataFrame, topic: TopicSettings) -> DataFrame:
    """Events that passed every check, with their Kafka lineage."""
    fields = [f.name for f in event_schema(topic)]
    return parsed.where(F.size("errors") == 0).select(*fields, *LINEAGE)


def quarantined_records(parsed: DataFrame, topic: TopicSettings) -> DataFrame:
    """Records that failed any check: the raw record, where it came from, and why."""
    return parsed.where(F.size("errors") > 0).select(
        F.lit(topic.name).alias("source_topic"),
        "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key", "value",
        "errors",
        F.array_join("errors", ", ").alias("reason"),
        F.current_timestamp().alias("quarantined_at"),
    )


def deduplicate_events(events: DataFrame, topic: TopicSettings) -> DataFrame:
    """Drop redeliveries of an event_id seen within the watermark delay.

    Streaming state holds each event_id only until the watermark passes its occurred_at + delay,
    so it stays bounded however long the stream runs. The first delivery seen is the one kept.
    """
    return events.withWatermark("occurred_at", topic.watermark_delay) \
        .dropDuplicatesWithinWatermark(["event_id"])
