"""Silver: parse and validate events per topic, quarantine bad records, drop redeliveries.

The event contract is published as JSON Schema (conf/<kafka topic>.schema.json); the pipeline
enforces the same contract with Spark expressions from the topic's DDL schema and rules
(conf/base.yml), and tests/test_contract*.py check that the two agree. A value either enters
silver exactly as the producer sent it or goes to quarantine with every reason: nothing is
rounded, coerced or truncated on the way, and fields the contract does not name are kept aside
(RESCUED_FIELDS).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from exactly_once.errors import SettingsError
from exactly_once.settings.contract import (
    DECIMAL_LITERAL,
    NEGATIVE_ZERO,
    TIMESTAMP_PATTERN,
    decimal_pattern,
)
from exactly_once.settings.pipeline import PREFIX, TopicSettings

# Reasons a value cannot be read as one JSON object at all. Each is the record's only reason:
# checking the fields of something unreadable would only repeat it.
MALFORMED_JSON = "malformed_json"  # not JSON, or JSON but not an object (also: no value)
INVALID_UTF8 = "invalid_utf8"  # the bytes are not UTF-8 text
TRAILING_CONTENT = "trailing_content"  # a JSON object followed by anything but whitespace
DUPLICATE_FIELD = "duplicate_field"  # a field name appears twice in the object
UNREADABLE = (MALFORMED_JSON, INVALID_UTF8, TRAILING_CONTENT, DUPLICATE_FIELD)


def invalid(field: str) -> str:
    """The reason for a field that is present (not null) but not a valid value of its type."""
    return f"invalid_{field}"


def invalid_scale(field: str) -> str:
    """The reason for a decimal with more places than its type has: it would be rounded."""
    return f"invalid_{field}_scale"


# TIMESTAMP fields (settings/contract.py): try_to_timestamp then rejects dates that do not exist
# (2026-02-30). The schema files carry the same pattern.
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX"


# Where each event came from, kept next to it: its Kafka coordinates, the record's Kafka
# timestamp (what lateness and clock skew are measured against) and when bronze ingested it
# (what silver's watermark follows, see `deduplicate_events`).
LINEAGE = ["kafka_partition", "kafka_offset", "kafka_timestamp", "ingested_at"]
# SHA-256 of the value's bytes: two deliveries with the same event_id and digest are one record
# delivered twice (a redelivery); the same event_id with another digest is another record.
VALUE_DIGEST = "value_sha256"
# Silver's column, on topics with a `max_event_age`: the broker received the event later than
# that after it happened. Such a grant is not applied (gold's `late_events` keeps it).
ARRIVED_LATE = "arrived_late"
# The fields of an event the contract does not name (yet: producers deploy first), kept aside
# as a JSON object, as Auto Loader keeps `_rescued_data`; NULL when there are none. The event is
# valid without them, and nothing is lost: `exactly-once rederive` re-derives them from bronze
# once the contract names them (docs/contract-changes.md).
RESCUED_FIELDS = "rescued_fields"
# What silver keeps next to an event that is not the event itself: gold leaves it out.
SILVER_ONLY = [*LINEAGE, RESCUED_FIELDS]


def event_schema(topic: TopicSettings) -> StructType:
    """The contract's typed fields, from the topic's DDL (`a STRING, b BIGINT`)."""
    schema = StructType.fromDDL(topic.schema)
    if not isinstance(schema, StructType):  # a lone type (`STRING`) parses, but has no fields
        raise SettingsError(f"setting {PREFIX}.topics.{topic.dataset_suffix}.schema must list "
                            f"fields, got {topic.schema!r}")
    return schema


def rule_failures(rules: dict[str, str]) -> list[Column]:
    """One column per rule: the rule's name where the row breaks it (false or NULL), else NULL."""
    # The rule's SQL inside SQL (a line of its own: a `--` comment in it ends with it).
    return [F.when(F.expr(f"NOT coalesce((\n{sql}\n), false)"), F.lit(name))
            for name, sql in rules.items()]


def _document(text: Column, digest: Column) -> Column:
    """The one parse of a value: `[<value>, "<its SHA-256>"]` as a VARIANT.

    parse_json reads the first JSON value of a text and ignores whatever follows it, so a value
    with trailing content would parse. Inside this array it cannot: trailing content either
    breaks the array's syntax or closes it before the digest, which the value cannot contain.
    VARIANT keeps each JSON type (a string "42" is not the number 42) and exact numbers, and
    parse_json rejects duplicate field names (spark.sql.variant.allowDuplicateKeys, false by
    default).
    """
    return F.try_parse_json(F.concat(F.lit("["), text, F.lit('\n,"'), digest, F.lit('"]')))


def _unreadable(value: Column, text: Column, digest: Column, document: Column,
                fields: Column) -> Column:
    """Why the value is not one JSON object (an UNREADABLE reason), or NULL when it is.

    `fields` is the document's first element as a map of field name to VARIANT value; NULL when
    it is not an object.
    """
    whole = F.coalesce(F.try_variant_get(document, "$[1]", "string") == digest, F.lit(False))
    # Only for a value that did not read whole, a second look to name what is wrong: its first
    # JSON value alone, and its field names (read once, as the one element of an array).
    repeats_a_name = F.exists(F.array(F.json_object_keys(text)),
                              lambda names: F.size(names) > F.size(F.array_distinct(names)))
    why_not = (F.when(F.try_variant_get(F.try_parse_json(text), "$", "map<string,variant>")
                      .isNotNull(), F.lit(TRAILING_CONTENT))
               .when(repeats_a_name, F.lit(DUPLICATE_FIELD))
               .otherwise(F.lit(MALFORMED_JSON)))
    return (F.when(value.isNull(), F.lit(MALFORMED_JSON))
            .when(~F.is_valid_utf8(text), F.lit(INVALID_UTF8))
            .when(~whole, why_not)
            .when(fields.isNull(), F.lit(MALFORMED_JSON)))


def _typed(field: StructField, value: Column) -> tuple[Column, Callable[[Column], Column]]:
    """A field's contract-typed value from its VARIANT value, and the reason it fails given
    that typed value (the column the first one becomes).

    The value is NULL when the field is absent, JSON null or invalid; the rules decide whether
    that is allowed. A present, non-null value that is not exactly a value of the type is named:
    STRING takes a JSON string; BIGINT and INT a JSON integer literal in range (not 1.0 or 1e2,
    which VARIANT reads as DECIMAL / DOUBLE); DECIMAL(p, s) a decimal string with at most s
    places; TIMESTAMP a string matching TIMESTAMP_PATTERN.

    The reason reads the typed column, not the expressions that made it: a check that rebuilt
    them parsed every field twice per record, about half of the parse's time
    (docs/benchmarks-history.md, "The parse, and what a settings A/B can tell").
    """
    kind = F.schema_of_variant(value)
    present = value.isNotNull() & ~F.is_variant_null(value)
    text = F.when(kind == "STRING", F.variant_get(value, "$", "string"))
    data_type = field.dataType
    not_a_value = F.lit(invalid(field.name))

    def failed(reason: Column) -> Callable[[Column], Column]:
        return lambda typed: F.when(typed.isNull() & present, reason)

    if isinstance(data_type, StringType):
        return text, failed(not_a_value)
    if isinstance(data_type, (LongType, IntegerType)):
        number = F.when(kind == "BIGINT", F.try_variant_get(value, "$", data_type.simpleString()))
        return number, failed(not_a_value)
    if isinstance(data_type, DecimalType):
        unsigned = decimal_pattern(data_type.precision, data_type.scale).removeprefix("^")
        exact = text.rlike("^-?" + unsigned) & ~text.rlike(NEGATIVE_ZERO)
        # A decimal with more places than the type's is never exact: only a NULL is looked at.
        too_many_places = text.rlike(DECIMAL_LITERAL) & \
            text.rlike(rf"\.[0-9]{{{data_type.scale + 1},}}\z")
        return F.when(exact, text.try_cast(data_type)), failed(
            F.when(too_many_places, F.lit(invalid_scale(field.name))).otherwise(not_a_value))
    if isinstance(data_type, TimestampType):
        moment = F.when(text.rlike(TIMESTAMP_PATTERN),
                        F.try_to_timestamp(text, F.lit(TIMESTAMP_FORMAT)))
        return moment, failed(not_a_value)
    raise ValueError(f"contract field {field.name}: no JSON mapping for {data_type.simpleString()}")


def parse_events(bronze: DataFrame, topic: TopicSettings) -> DataFrame:
    """The topic's records with typed event fields, the fields the contract does not name
    (RESCUED_FIELDS) and `errors`: every check the record fails.

    The value is parsed once (see `_document`); every field's type check and every rule reads
    that one parse. `errors` is empty for a valid event.
    """
    schema = event_schema(topic)
    records = bronze.where(F.col("topic") == topic.kafka_topic).select(
        F.col("key").cast("string").alias("kafka_key"),
        F.col("value").cast("string").alias("value"),
        F.col("value").alias("_bytes"),
        F.sha2("value", 256).alias(VALUE_DIGEST),
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        "ingested_at",
    )
    parsed = records.withColumn("_document", _document(F.col("value"), F.col(VALUE_DIGEST))) \
        .withColumn("_fields", F.try_variant_get("_document", "$[0]", "map<string,variant>"))
    readable = parsed.withColumn("_unreadable", _unreadable(
        F.col("_bytes"), F.col("value"), F.col(VALUE_DIGEST), F.col("_document"),
        F.col("_fields"))) \
        .withColumn("_fields", F.when(F.col("_unreadable").isNull(), F.col("_fields")))
    typed = {f.name: _typed(f, F.try_element_at("_fields", F.lit(f.name))) for f in schema}
    known = F.array(*[F.lit(f.name) for f in schema])
    # A null field counts as absent, here too.
    rescued = F.map_filter("_fields", lambda name, value: ~F.array_contains(known, name)
                           & ~F.is_variant_null(value))
    # A lambda runs interpreted, entry by entry: only where a name is not the contract's, which
    # most records lack (docs/benchmarks-history.md, "A 200,000-event update's tasks").
    unknown_names = F.size(F.array_except(F.map_keys("_fields"), known)) > 0
    events = readable.select("*", *[value.alias(name) for name, (value, _) in typed.items()],
                             F.when(unknown_names & (F.size(rescued) > 0), F.to_json(rescued))
                             .alias(RESCUED_FIELDS))
    checks = F.array(*[failed(F.col(f"`{name}`")) for name, (_, failed) in typed.items()],
                     *rule_failures(dict(topic.rules)))
    errors = F.when(F.col("_unreadable").isNotNull(), F.array("_unreadable")).otherwise(
        F.filter(checks, lambda e: e.isNotNull()))
    return events.withColumn("errors", errors).drop("_bytes", "_document", "_unreadable",
                                                    "_fields")


def well_formed_events(parsed: DataFrame, topic: TopicSettings) -> DataFrame:
    """Events whose value parsed into the contract's types, whatever the rules say of them.

    Each keeps `errors`, where the rules' verdicts already are: the pipeline states each rule as
    an expectation on that verdict (`rule_verdicts`), so failures are counted per rule without
    evaluating a rule twice.
    """
    fields = [f.name for f in event_schema(topic)]
    parse_errors = F.array_except("errors", F.array(*[F.lit(name) for name in topic.rules]))
    return parsed.where(F.size(parse_errors) == 0).select(*fields, RESCUED_FIELDS, "kafka_key",
                                                          *LINEAGE, VALUE_DIGEST, "errors")


def rule_verdicts(topic: TopicSettings) -> dict[str, str]:
    """Each rule as an expectation reading the verdict `parse_events` recorded in `errors`."""
    return {name: f"NOT array_contains(errors, '{name}')" for name in topic.rules}


def arrived_late(max_age: str) -> Column:
    """Whether the broker received the event more than `max_age` after it happened.

    Measured by the record's Kafka timestamp, a fact of the log, never by when the pipeline
    runs: a rebuild months later, a full refresh or a restart after an outage decide the same.
    """
    if not max_age:
        return F.lit(False)
    return F.col("occurred_at") < F.col("kafka_timestamp") - F.expr(f"INTERVAL {max_age}")


def silver_columns(topic: TopicSettings) -> list[str]:
    """What a silver table stores: the event's contract fields, the fields it has beyond them
    (RESCUED_FIELDS), its lineage and, on topics with a `max_event_age`, ARRIVED_LATE."""
    late = [ARRIVED_LATE] if topic.max_event_age else []
    return [*(f.name for f in event_schema(topic)), RESCUED_FIELDS, *LINEAGE, *late]


def silver_events(checked: DataFrame, topic: TopicSettings) -> DataFrame:
    """Valid events as silver stores them, redeliveries within the watermark dropped."""
    if topic.max_event_age:
        checked = checked.withColumn(ARRIVED_LATE, arrived_late(topic.max_event_age))
    return deduplicate_events(checked, topic).select(*silver_columns(topic))


def typed_fields_column(topic: TopicSettings) -> str:
    """The quarantine's column of the topic's typed fields, e.g. `orders_fields`."""
    return f"{topic.dataset_suffix}_fields"


def quarantined_records(parsed: DataFrame, topic: TopicSettings) -> DataFrame:
    """Records that failed any check: the raw record, where it came from, and why.

    `value` holds the bytes exactly as delivered (CAST(value AS BINARY) returns them, also when
    they are not UTF-8), so every field is kept, NULLs included. Next to it, the topic's
    contract fields as parsed (`typed_fields_column`: a struct, one per topic, NULL where a
    field is absent or not a value of its type), so a quarantined record can be queried by its
    fields; a field the contract gains becomes a field of the struct.
    """
    fields = [F.col(f"`{f.name}`") for f in event_schema(topic)]
    return parsed.where(F.size("errors") > 0).select(
        F.lit(topic.dataset_suffix).alias("source_topic"),
        "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key", "value",
        "errors",
        F.array_join("errors", ", ").alias("reason"),
        F.current_timestamp().alias("quarantined_at"),
        F.struct(*fields).alias(typed_fields_column(topic)),
    )


def dedup_keys(events: DataFrame) -> list[str]:
    """What makes a delivery a redelivery: the event_id and the value's bytes (VALUE_DIGEST) and,
    where silver marks it, whether it arrived late.

    Gold reads silver, so silver may only drop a delivery that gold would treat exactly like the
    one it keeps. A byte-identical copy is that; a copy with other content under the same
    event_id is not (gold's tie-break decides between them by content), nor is an in-time copy
    of a grant whose first delivery was late (the ledger applies it).
    """
    return ["event_id", VALUE_DIGEST, *([ARRIVED_LATE] if ARRIVED_LATE in events.columns else [])]


def deduplicate_events(events: DataFrame, topic: TopicSettings) -> DataFrame:
    """Drop redeliveries seen within the watermark delay of the first copy's arrival.

    The watermark follows `ingested_at`, when bronze ingested the record: it only grows from one
    bronze update to the next, so a record new to silver is never behind the watermark, however
    long after it happened it was produced (an event-time watermark would drop such an event as
    late) and however far behind the others its partition was read. Streaming state holds each
    key until the watermark passes its arrival + delay, so it stays bounded. The first delivery
    seen is the one kept. Redeliveries later than that reach gold, whose durable guards (the
    sequence, the ledger's event_id) ignore them.
    """
    return events.withWatermark("ingested_at", topic.watermark_delay) \
        .dropDuplicatesWithinWatermark(dedup_keys(events))
