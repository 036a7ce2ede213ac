"""Bronze: raw Kafka records, every one kept, exactly as the broker delivered them."""

from __future__ import annotations

import glob
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.kafka.security import kafka_security_options
from exactly_once.settings.pipeline import FILE_SOURCE, Settings

# The Kafka source's columns (with includeHeaders), in its order.
KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                 "headers"]

# One line of `kcat -C -J` output.
KCAT_SCHEMA = ("topic STRING, partition INT, offset BIGINT, tstype STRING, ts BIGINT, broker INT, "
               "headers ARRAY<STRING>, key STRING, payload STRING")


def read_kafka(spark: SparkSession, settings: Settings) -> DataFrame:
    """The subscribed topics as a stream, in the Kafka source's own columns."""
    kafka = settings.kafka
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", ",".join(t.kafka_topic for t in settings.topics.values()))
        .option("startingOffsets", kafka.starting_offsets)
        .option("failOnDataLoss", str(kafka.fail_on_data_loss).lower())
        .option("includeHeaders", "true")
        # read_committed: the driver's end offsets stop at the last stable offset and the
        # tasks skip aborted records and transaction markers (conf/base.yml).
        .option("kafka.isolation.level", kafka.isolation_level)
        # A broker that does not answer fails the update within a bounded time (conf/base.yml).
        .option("kafka.request.timeout.ms", str(kafka.request_timeout_ms))
        .option("kafka.default.api.timeout.ms", str(kafka.default_api_timeout_ms))
        .option("kafkaConsumer.pollTimeoutMs", str(kafka.poll_timeout_ms))
        .option("fetchOffset.numRetries", str(kafka.fetch_offset_retries))
        # PLAINTEXT locally; SASL credentials from a secret scope / env vars, never from conf.
        .options(**kafka_security_options(kafka))
    )
    if kafka.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(kafka.max_offsets_per_trigger))
    return reader.load()


def read_kcat_file(spark: SparkSession, path: str) -> DataFrame:
    """`kcat -C -J` JSONL dumps as a stream with the Kafka source's columns.

    `path` is one dump, a directory of dumps (subdirectories included) or a glob. The stream's
    checkpoint remembers the files it read, so each update reads only the dumps added since the
    last one, each exactly once. kcat prints key and payload as text and headers as a flat
    [name, value, ...] list; they are turned back into Kafka's binary key/value and
    array<struct<key, value>> headers.
    """
    reader = (spark.readStream.schema(KCAT_SCHEMA).option("mode", "FAILFAST")
              # The file source skips a new file older than the newest one it has seen minus
              # maxFileAge (7 days by default): a dump copied in late with its original time
              # would be lost. Each file is still read once; the checkpoint lists every file.
              .option("maxFileAge", "36500d"))
    if glob.has_magic(path):
        # basePath keeps partition discovery out of the directories the glob matches in.
        reader = reader.option("basePath", _glob_root(path))
    elif Path(path).is_dir():
        # Plain directory names (one per day, say) are not partitions of the dumps.
        reader = reader.option("recursiveFileLookup", "true")
    else:
        # Spark streams a directory or a glob, never a single file: a lone file becomes the
        # glob `{name}`, which matches just it, with basePath its directory.
        file = Path(path)
        path = str(file.parent / f"{{{file.name}}}")
        reader = reader.option("basePath", str(file.parent))
    raw = reader.json(path)
    headers = F.transform(
        F.sequence(F.lit(0), F.expr("size(headers) div 2 - 1").cast("int")),
        lambda i: F.struct(F.element_at("headers", i * 2 + 1).alias("key"),
                           F.encode(F.element_at("headers", i * 2 + 2), "UTF-8").alias("value")),
    )
    return raw.select(
        F.encode("key", "UTF-8").alias("key"),
        F.encode("payload", "UTF-8").alias("value"),
        "topic",
        "partition",
        "offset",
        F.timestamp_millis("ts").alias("timestamp"),
        F.when(F.col("tstype") == "logappend", 1).otherwise(0).alias("timestampType"),
        F.when(F.size("headers") > 0, headers).otherwise(F.array().cast(
            "array<struct<key:string,value:binary>>")).alias("headers"),
    )


def _glob_root(pattern: str) -> str:
    """The directory a glob starts in: `/dumps/2026-*/x.jsonl` -> `/dumps`."""
    parts = Path(pattern).parts
    literal = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return str(Path(*parts[:literal])) if literal else "."


def with_ingestion_time(records: DataFrame, now: Column | None = None) -> DataFrame:
    """Kafka records as bronze stores them: untouched, plus when this pipeline ingested them."""
    return records.select(*KAFKA_COLUMNS,
                          (now if now is not None else F.current_timestamp()).alias("ingested_at"))


def raw_kafka_records(spark: SparkSession, settings: Settings) -> DataFrame:
    """The configured source: the Kafka topics, or a kcat file for local replays."""
    if settings.source.startswith(FILE_SOURCE):
        records = read_kcat_file(spark, settings.source.removeprefix(FILE_SOURCE))
    else:
        records = read_kafka(spark, settings)
    return with_ingestion_time(records)
