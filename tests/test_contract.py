"""The event contract, enforced exactly (issue 10): each way Spark's lenient JSON parsing used to
let a record through silently altered is now quarantined with its reason, and nothing valid is
changed on its way into silver."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import contract_oracle
import pytest
from events import grant, order
from jsonschema import Draft202012Validator
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from silver_frames import checked_events, kafka_rows
from silver_pipeline import run_silver

from exactly_once.deploy import contract_schema
from exactly_once.kafka.kcat import KafkaRecord
from exactly_once.local.inspect.delivery import utc
from exactly_once.transforms.silver import (
    TIMESTAMP_PATTERN,
    UNREADABLE,
    decimal_pattern,
    event_schema,
    invalid,
    invalid_scale,
    parse_events,
    quarantined_records,
    well_formed_events,
)

VALID = json.dumps(order("e1", "o1", 1))
# The events happen at 2026-11-21T10:00:00Z (events.OCCURRED_AT); Kafka stamps them a minute
# later.
KAFKA_TIME = datetime(2026, 11, 21, 10, 1, tzinfo=timezone.utc)


def delivered(spark, records):
    return kafka_rows(spark, records, timestamp=KAFKA_TIME)


def _with(field: str, raw: str) -> str:
    """The valid order with one field's JSON text replaced verbatim."""
    event = order("e1", "o1", 1)
    return "{" + ", ".join(f"{json.dumps(k)}: {raw if k == field else json.dumps(v)}"
                           for k, v in event.items()) + "}"


# The table: what silver stored before, and the reasons it is quarantined with now.
SILENTLY_ALTERED = [
    pytest.param(_with("status", '{"a": 1}'), ["invalid_status", "full_state_on_upsert"],
                 id="object as status (stored as the text {\"a\":1})"),
    pytest.param(_with("event_id", "42"), ["invalid_event_id", "has_event_id"],
                 id="number as event_id (stored as \"42\")"),
    pytest.param(_with("amount", '"129.999"'), ["invalid_amount_scale", "full_state_on_upsert"],
                 id="three decimal places (rounded to 130.00)"),
    pytest.param(VALID + " trailing", ["trailing_content"], id="trailing text (ignored)"),
    pytest.param(VALID + VALID, ["trailing_content"], id="two objects back to back"),
    pytest.param(VALID[:-1] + ', "sequence": 99}', ["duplicate_field"],
                 id="duplicate key (last one won)"),
    pytest.param(_with("occurred_at", "1793495733000"), ["invalid_occurred_at", "has_occurred_at"],
                 id="epoch millis (year 55840)"),
    pytest.param(_with("occurred_at", '"2026-11-02"'), ["invalid_occurred_at", "has_occurred_at"],
                 id="date without time (UTC assumed)"),
    pytest.param(_with("occurred_at", '"2026-11-02T10:00:00"'),
                 ["invalid_occurred_at", "has_occurred_at"], id="no zone (UTC assumed)"),
    pytest.param(VALID.replace('"e1"', '"e\xff1"').encode("latin-1"), ["invalid_utf8"],
                 id="non-UTF-8 byte in event_id (became U+FFFD)"),
]


@pytest.mark.parametrize("payload, errors", SILENTLY_ALTERED)
def test_what_lenient_parsing_let_through_is_quarantined_with_its_reason(spark, settings,
                                                                         payload, errors):
    orders = settings.topic("orders")
    parsed = parse_events(delivered(spark, [("orders", "o1", payload)]), orders)
    assert checked_events(parsed, orders).count() == 0
    (row,) = quarantined_records(parsed, orders).collect()
    assert row["errors"] == errors
    raw = payload if isinstance(payload, bytes) else payload.encode()
    kept = quarantined_records(parsed, orders).selectExpr("CAST(value AS BINARY)").first()[0]
    assert bytes(kept) == raw  # the raw value, byte for byte, whatever it holds


def test_valid_values_reach_silver_exactly_as_sent(spark, settings):
    orders = settings.topic("orders")
    sent = order("e\u00e9\U0001f600\u0000", "o1", 9223372036854775807, amount="129.9",
                 status='{"a": 1}', occurred_at="2026-11-20T23:30:00.123456-01:30")
    parsed = parse_events(delivered(spark, [("orders", "o1", sent)]), orders)
    (row,) = checked_events(parsed, orders).collect()
    assert row["event_id"] == sent["event_id"] and row["status"] == '{"a": 1}'  # a string stays
    assert row["sequence"] == 9223372036854775807 and row["amount"] == Decimal("129.90")
    # The same instant, in UTC (Spark hands it over as a naive local time: `utc` makes it one).
    assert utc(row["occurred_at"]).isoformat() == "2026-11-21T01:00:00.123456+00:00"


@pytest.mark.parametrize("xp, errors", [
    (2147483647, []), (2147483648, ["invalid_xp", "positive_xp"]),
    (1.0, ["invalid_xp", "positive_xp"]), ("1e2", ["invalid_xp", "positive_xp"]),
    (True, ["invalid_xp", "positive_xp"]),
])
def test_xp_is_an_integer_literal_within_int(spark, settings, xp, errors):
    rewards = settings.topic("player_rewards")
    payload = json.dumps(grant("x1", "p1", 0)).replace('"xp": 0', f'"xp": {json.dumps(xp)}'
                                                      if xp != "1e2" else '"xp": 1e2')
    parsed = parse_events(delivered(spark, [("player-rewards", "p1", payload)]), rewards)
    assert [r["errors"] for r in parsed.collect()] == [errors]


# --- The far-future event no longer blinds silver -------------------------------------------


def test_an_event_dated_far_ahead_is_quarantined_and_later_events_still_reach_silver(spark,
                                                                                    tmp_path):
    """2099 (and epoch millis, once read as year 55840) once moved silver's event-time
    watermark for good: every later event was dropped as past it. They are quarantined
    (`occurred_at_in_future`), silver's watermark follows ingestion time anyway, and a later
    valid event reaches silver."""
    kafka_ms = int(KAFKA_TIME.timestamp() * 1000)
    first = [
        KafkaRecord("orders", "o1", json.dumps(order("e1", "o1", 1)), 0, 0, kafka_ms),
        KafkaRecord("orders", "o2", json.dumps(order("e2", "o2", 1,
                                                     occurred_at="2099-01-01T00:00:00Z")),
                    0, 1, kafka_ms),
        KafkaRecord("orders", "o3", _with("occurred_at", "1793495733000").replace('"o1"', '"o3"')
                    .replace('"e1"', '"e4"'),
                    0, 2, kafka_ms),
        KafkaRecord("player-rewards", "p1", json.dumps(grant("g1", "p1", 5,
                                                             occurred_at="2099-01-01T00:00:00Z")),
                    0, 0, kafka_ms),
        # At exactly max_clock_skew (5 minutes) after its Kafka timestamp: still plausible.
        KafkaRecord("player-rewards", "p1", json.dumps(grant("g2", "p1", 5,
                                                             occurred_at="2026-11-21T10:06:00Z")),
                    0, 1, kafka_ms),
    ]
    later = [
        KafkaRecord("orders", "o1", json.dumps(order("e3", "o1", 2,
                                                     occurred_at="2026-11-21T10:02:00Z")),
                    0, 3, kafka_ms + 60_000),
        KafkaRecord("player-rewards", "p1", json.dumps(grant("g3", "p1", 5,
                                                             occurred_at="2026-11-21T10:02:00Z")),
                    0, 2, kafka_ms + 60_000),
    ]
    tables = run_silver(spark, [first, later], tmp_path)
    assert sorted(r["event_id"] for r in tables["silver_orders"]) == ["e1", "e3"]
    assert sorted(r["event_id"] for r in tables["silver_player_rewards"]) == ["g2", "g3"]
    assert sorted((r["kafka_topic"], r["kafka_offset"], r["reason"])
                  for r in tables["quarantine"]) == [
        ("orders", 1, "occurred_at_in_future"),
        ("orders", 2, "invalid_occurred_at, has_occurred_at"),  # a number is no date-time
        ("player-rewards", 0, "occurred_at_in_future")]


# --- The published schema files and the pipeline agree --------------------------------------

KAFKA_TOPICS = {"orders": "orders", "player_rewards": "player-rewards"}  # settings -> Kafka
BOUNDS = {"bigint": (-2**63, 2**63 - 1), "int": (-2**31, 2**31 - 1)}


def _portable(pattern: str) -> str:
    """A pipeline (Java) pattern as the schema writes it: `\\z` is not in JSON Schema's regex
    dialect; `(?!\\n)$` means the same in it, in Python and in Java."""
    assert pattern.endswith(r"\z")
    return pattern.removesuffix(r"\z") + r"(?!\n)$"


def _types(prop: dict) -> set[str]:
    kind = prop["type"]
    return {kind} if isinstance(kind, str) else set(kind)


@pytest.mark.parametrize("name", KAFKA_TOPICS)
def test_the_schema_file_has_the_pipelines_fields_and_types(settings, name):
    topic = settings.topic(name)
    doc = contract_oracle.schema(topic.kafka_topic)
    Draft202012Validator.check_schema(doc)
    # Fields it does not name are kept aside (rescued_fields), not refused.
    assert doc["type"] == "object" and doc["additionalProperties"] is True
    fields = event_schema(topic)
    assert list(doc["properties"]) == [f.name for f in fields]
    for field in fields:
        prop = doc["properties"][field.name]
        kind = field.dataType.simpleString()
        assert _types(prop) - {"null"} == {"integer" if kind in BOUNDS else "string"}, field
        if kind in BOUNDS:  # the type's range, or a rule's tighter bound (xp > 0)
            low, high = BOUNDS[kind]
            assert low <= prop["minimum"] <= prop["maximum"] == high, field.name
        if kind == "timestamp":
            assert prop["format"] == "date-time"
            assert prop["pattern"] == _portable(TIMESTAMP_PATTERN)
        if kind.startswith("decimal"):  # non-negative: the rule non_negative_amount
            dt = field.dataType
            assert prop["pattern"] == _portable(decimal_pattern(dt.precision, dt.scale))
        if kind == "string" and "enum" not in prop and "minLength" not in prop:
            assert set(prop) <= {"type", "description"}, field.name  # any string


@pytest.mark.parametrize("name", KAFKA_TOPICS)
def test_the_event_type_enum_is_the_known_event_type_rule(settings, name):
    topic = settings.topic(name)
    enum = contract_oracle.schema(topic.kafka_topic)["properties"]["event_type"]["enum"]
    assert set(re.findall(r"'([^']*)'", topic.rules["known_event_type"])) == set(enum)


def test_required_fields_are_the_ones_a_rule_needs(spark, settings):
    """A field is required by the schema exactly when a rule fails without it (NULL), and nullable
    exactly when it is not required; order state is required unless the event is a delete."""
    for name, topic in settings.topics.items():
        doc = contract_oracle.schema(topic.kafka_topic)
        fields = [f.name for f in event_schema(topic)]
        samples = {"orders": [("order_updated", doc.get("else", {}).get("required", [])),
                              ("order_deleted", [])],
                   "player_rewards": [("xp_granted", [])]}[name]
        for event_type, conditional in samples:
            valid = _typed_event(topic, event_type)
            rows = [valid] + [dict(valid, **{f: None}) for f in fields]
            fails = _rule_results(spark, topic, rows)
            assert not any(fails[0].values()), (name, event_type, fails[0])
            needed = {f for f, result in zip(fields, fails[1:], strict=True)
                      if any(result.values())}
            assert needed == set(doc["required"]) | set(conditional), (name, event_type)
        for field, prop in doc["properties"].items():
            assert ("null" in _types(prop)) == (field not in doc["required"]), field


def test_every_rule_is_true_or_false_never_null(spark, settings):
    """On every mix of NULL and valid fields, each rule evaluates to TRUE or FALSE, so Databricks
    and the local runtime (and GX) count a NULL the same way: as a failure of a named rule."""
    for topic in settings.topics.values():
        valid = _typed_event(topic, "order_updated" if topic.dataset_suffix == "orders"
                             else "xp_granted")
        columns = list(valid)
        rows = [{c: (valid[c] if mask >> i & 1 else None) for i, c in enumerate(columns)}
                for mask in range(2 ** len(columns))]
        df = spark.createDataFrame(rows, _typed_schema(topic))
        nulls = df.select(*[F.sum(F.expr(sql).isNull().cast("int")).alias(rule)
                            for rule, sql in topic.rules.items()]).first().asDict()
        assert nulls == {rule: 0 for rule in topic.rules}, topic.dataset_suffix


def test_the_value_is_parsed_once_however_many_rules(spark, settings):
    """Every field check and rule reads the one parse; more rules add no parse of the value."""
    orders = settings.topic("orders")
    many = dataclasses.replace(orders, rules={
        **orders.rules, **{f"rule_{i}": f"length(status) > {i}" for i in range(20)}})
    counts = []
    for topic in (dataclasses.replace(orders, rules={}), orders, many):
        plan = well_formed_events(parse_events(delivered(spark, [("orders", "o1", VALID)]), topic),
                                  topic)._jdf.queryExecution().executedPlan().toString()
        counts.append((plan.count("parseJson("), plan.count("jsonObjectKeys(")))
    # One parse for every record, and one second look (a parse and the field names) that only
    # a value that did not read whole gets, to name why.
    assert counts == [(2, 1)] * 3


def _typed_schema(topic) -> StructType:
    return StructType([*event_schema(topic).fields, StructField("kafka_key", StringType()),
                       StructField("kafka_timestamp", TimestampType())])


def _typed_event(topic, event_type: str) -> dict:
    """A valid event as the checked view holds it: typed fields, kafka_key, kafka_timestamp."""
    occurred = datetime(2026, 11, 21, 10, 0)
    event = {"event_id": "e1", "event_type": event_type, "sequence": 1, "occurred_at": occurred,
             "customer_id": "c1", "status": "paid", "amount": Decimal("10.00"),
             "currency": "EUR", "xp": 5, "reason": "quest"}
    fields = {f.name: event.get(f.name, "k1") for f in event_schema(topic)}  # the key field: k1
    return fields | {"kafka_key": "k1", "kafka_timestamp": occurred}


def _rule_results(spark, topic, rows: list[dict]) -> list[dict[str, bool]]:
    """Per row, in order, per rule: whether the row fails it."""
    df = spark.createDataFrame([(i, *row.values()) for i, row in enumerate(rows)],
                               StructType([StructField("_n", LongType()),
                                           *_typed_schema(topic).fields]))
    failed = df.select("_n", *[(~F.coalesce(F.expr(sql), F.lit(False))).alias(rule)
                               for rule, sql in topic.rules.items()]).orderBy("_n").collect()
    return [{rule: r[rule] for rule in topic.rules} for r in failed]


@pytest.mark.parametrize("name, field, low, high", [
    ("orders", "sequence", -2**63, 2**63 - 1), ("player_rewards", "xp", 1, 2**31 - 1)])
def test_integer_bounds_are_where_the_pipeline_draws_them(spark, settings, name, field, low,
                                                          high):
    topic = settings.topic(name)
    prop = contract_oracle.schema(topic.kafka_topic)["properties"][field]
    assert (prop["minimum"], prop["maximum"]) == (low, high)
    base = order("e1", "o1", 1) if name == "orders" else grant("e1", "o1", 1)
    key = "o1"
    payloads = [json.dumps(base).replace(f'"{field}": 1', f'"{field}": {n}')
                for n in (low - 1, low, high, high + 1)]
    parsed = parse_events(delivered(spark, [(topic.kafka_topic, key, p) for p in payloads]), topic)
    errors = [r["errors"] for r in parsed.orderBy("kafka_offset").collect()]
    assert [bool(e) for e in errors] == [True, False, False, True], errors


# --- The documentation says the same ----------------------------------------------------------

CONTRACT_PAGE = Path(__file__).resolve().parent.parent / "docs" / "contract.md"


def _contract_section() -> str:
    """docs/contract.md, the event contract's page on the documentation site."""
    return CONTRACT_PAGE.read_text()


def test_the_contract_page_field_tables_match_the_schema_files(settings):
    section = _contract_section()
    for topic in settings.topics.values():
        doc = contract_oracle.schema(topic.kafka_topic)
        table = section[section.index(f"`{topic.kafka_topic}` (Kafka key = `{topic.key}`)"):]
        table = table[table.index("| field"):]
        table = table[:table.index("\n\n")]
        listed = {}
        for row in table.splitlines()[2:]:
            first, json_value, required = (c.strip() for c in row.strip("|").split("|"))
            for field in re.findall(r"`([a-z_]+)`", first):
                listed[field] = (json_value, required)
        assert set(listed) == set(doc["properties"])
        conditional = doc.get("else", {}).get("required", [])
        for field, (_, required) in listed.items():
            assert required == ("yes" if field in doc["required"] else
                                "unless `order_deleted`" if field in conditional else "no"), field
        enum = doc["properties"]["event_type"]["enum"]
        assert re.findall(r'`"([a-z_]+)"`', listed["event_type"][0]) == enum
    skews = {t.max_clock_skew for t in settings.topics.values()}
    assert len(skews) == 1 and f"`max_clock_skew` ({skews.pop()}, `conf/base.yml`)" in \
        " ".join(section.split())


def test_the_contract_page_lists_every_reason_the_pipeline_gives(spark, settings):
    reasons = _contract_section().split("Quarantine reasons", 1)[1]
    listed = {name for item in re.findall(r"^- (.*?):", reasons, re.M)
              for name in re.findall(r"`([a-z0-9_<>]+)`", item)}
    fields = [f for t in settings.topics.values() for f in event_schema(t)]
    given = set(UNREADABLE) | {invalid("<field>")} | \
        {invalid_scale(f.name) for f in fields if isinstance(f.dataType, DecimalType)} | \
        {rule for t in settings.topics.values() for rule in t.rules}
    assert listed == given


# --- The schema files follow conf/ -----------------------------------------------------------


def test_the_schema_files_are_what_conf_makes_them():
    """`make bundle-config` writes them (deploy/contract_schema.py); a stale one is reported."""
    assert contract_schema.problems() == []


def test_the_schema_files_follow_a_changed_contract(tmp_path):
    """A field added to conf/ appears in its topic's file (optional: it may be null), a widened
    type takes the wider bounds (a rule's tighter bound kept), a field removed is gone; what a
    person wrote of the other fields stays."""
    conf = tmp_path / "conf"
    shutil.copytree(contract_oracle.CONF, conf)
    base = conf / "base.yml"
    text = base.read_text()
    text = text.replace("      currency STRING\n", "      currency STRING, coupon STRING\n")
    text = text.replace("player_id STRING, xp INT, reason STRING,", "player_id STRING, xp BIGINT,")
    base.write_text(text)
    assert sorted(contract_schema.problems(conf)) == [
        "conf/orders.schema.json is stale: run `make bundle-config`",
        "conf/player-rewards.schema.json is stale: run `make bundle-config`"]
    contract_schema.write(conf)
    assert contract_schema.problems(conf) == []
    orders = json.loads((conf / "orders.schema.json").read_text())
    before = contract_oracle.schema("orders")
    assert orders["properties"] == {**before["properties"], "coupon": {"type": ["string", "null"]}}
    assert {k: v for k, v in orders.items() if k != "properties"} == \
        {k: v for k, v in before.items() if k != "properties"}
    rewards = json.loads((conf / "player-rewards.schema.json").read_text())
    assert "reason" not in rewards["properties"]
    assert rewards["properties"]["xp"] == {"type": "integer", "minimum": 1,
                                           "maximum": 2**63 - 1}
    validate = Draft202012Validator(orders).is_valid
    event = order("e1", "o1", 1)
    assert validate(event) and validate({**event, "coupon": "SAVE10"})
    assert validate({**event, "coupon": None}) and not validate({**event, "coupon": 5})
