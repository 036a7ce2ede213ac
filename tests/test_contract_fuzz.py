"""Fuzz: generated records through the real silver and quarantine flows, judged by an oracle.

Hypothesis draws contract-valid events of both topics and mutations of them (type swaps, nested
values, extra digits, string encodings, duplicate and missing fields, leading and trailing bytes,
boundary numbers, zone-less, date-only and numeric timestamps, far-future times, wrong keys,
unknown fields, values that are not objects). tests/contract_oracle.py judges each record
independently of the Spark code. Valid -> in silver with identical field values (exact
decimal, exact string, same instant) and not in quarantine; invalid -> in quarantine with a
reason and not in silver. Never both, never neither.

All records of a test go through ONE pipeline update (a Spark update costs far more than a
record), so "examples" here are records: CI runs EXAMPLES of them, derandomized, so always the
same ones. EXACTLY_ONCE_CONTRACT_EXAMPLES=N runs N and makes them random (docs/reference-model.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from contract_oracle import (
    NOT_AN_OBJECT,
    NOT_JSON,
    NOT_UTF8,
    Verdict,
    instant,
    judge,
    validator,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from reference import MAX_EVENT_AGE
from silver_frames import KAFKA_SCHEMA, checked_events
from silver_pipeline import run_silver

from exactly_once.kafka.kcat import KafkaRecord
from exactly_once.local.inspect.delivery import utc
from exactly_once.transforms.bronze import with_ingestion_time
from exactly_once.transforms.silver import (
    INVALID_UTF8,
    MALFORMED_JSON,
    RESCUED_FIELDS,
    UNREADABLE,
    event_schema,
    parse_events,
    quarantined_records,
)

EXAMPLES_KNOB = "EXACTLY_ONCE_CONTRACT_EXAMPLES"
EXAMPLES = int(os.environ.get(EXAMPLES_KNOB, "400"))
SKEW = timedelta(minutes=5)  # conf/base.yml: topics.*.max_clock_skew
T0 = datetime(2026, 11, 21, 10, 0, tzinfo=timezone.utc)
ID = "~ID~"  # in a generated event_id; the record's number replaces it, so valid ids are unique
TOPICS = {"orders": "orders", "player-rewards": "player_rewards"}  # Kafka -> settings name
ORDER_TYPES = ["order_created", "order_updated", "order_cancelled", "order_deleted"]
STATE = ["customer_id", "status", "amount", "currency"]
BIGINT, INT = (-2**63, 2**63 - 1), (-2**31, 2**31 - 1)


@dataclass
class Draft:
    """A record before rendering: the value's members as JSON texts, so they can be broken."""

    topic: str
    key: str | None
    kafka_time: datetime
    members: list[tuple[str, str]]  # (name as JSON text, value as JSON text)
    how: list[str] = field(default_factory=list)  # what was done to it, for failure messages
    prefix: str = ""
    suffix: str = ""
    whole: str | None = None  # the entire value (instead of an object of members)
    no_value: bool = False
    bad_bytes: tuple[int, bytes] | None = None  # inserted at a position of the UTF-8 value

    def get(self, name: str) -> str | None:
        return next((v for n, v in self.members if n == json.dumps(name)), None)

    def set(self, name: str, value: str | None) -> None:
        """Replace the field's JSON text (None drops the field); add it if missing."""
        key = json.dumps(name)
        if value is None:
            self.members = [(n, v) for n, v in self.members if n != key]
        elif any(n == key for n, _ in self.members):
            self.members = [(n, value if n == key else v) for n, v in self.members]
        else:
            self.members.append((key, value))


@dataclass(frozen=True)
class Record:
    topic: str
    key: str | None
    value: bytes | None
    kafka_time: datetime
    how: str


def render(draft: Draft, number: int, spaces: list[str]) -> Record:
    if draft.no_value:
        return Record(draft.topic, draft.key, None, draft.kafka_time, " / ".join(draft.how))
    sep = iter(spaces * (2 + 4 * len(draft.members)))
    if draft.whole is not None:
        text = draft.whole
    else:
        text = "{" + next(sep) + ",".join(f"{next(sep)}{n}{next(sep)}:{next(sep)}{v}"
                                          for n, v in draft.members) + next(sep) + "}"
    value = (draft.prefix + text + draft.suffix).replace(ID, str(number)).encode()
    if draft.bad_bytes is not None:
        at, bad = draft.bad_bytes
        at = at % (len(value) + 1)
        value = value[:at] + bad + value[at:]
    return Record(draft.topic, draft.key, value, draft.kafka_time, " / ".join(draft.how))


# --- Valid events ----------------------------------------------------------------------------

def strings(max_size: int = 6):
    return st.text(max_size=max_size)  # any Unicode scalar value, no lone surrogates


@st.composite
def json_string(draw, text: str) -> str:
    return json.dumps(text, ensure_ascii=draw(st.booleans()))


@st.composite
def rfc3339(draw, moment: datetime) -> str:
    """`moment` written with any allowed zone and 0-6 fractional digits (the text is the truth:
    fewer digits are a different instant, which the oracle reads from the text)."""
    minutes = draw(st.sampled_from([0, 0, 0, 60, -300, 330, 765, 840, -840, -1]))
    local = moment.astimezone(timezone(timedelta(minutes=minutes)))
    digits = draw(st.integers(0, 6))
    fraction = ("." + f"{local.microsecond:06d}"[:digits]) if digits else ""
    if minutes == 0 and draw(st.booleans()):
        zone = "Z"
    else:
        sign, m = ("-" if minutes < 0 else "+"), abs(minutes)
        zone = f"{sign}{m // 60:02d}:{m % 60:02d}"
    return local.strftime("%Y-%m-%dT%H:%M:%S") + fraction + zone


@st.composite
def event_times(draw, kafka_time: datetime, ancient: bool) -> datetime:
    """Mostly before the Kafka timestamp, sometimes up to max_clock_skew after it."""
    kind = draw(st.sampled_from(["past", "past", "recent", "ahead", "at_skew"] +
                                (["ancient"] if ancient else [])))
    micros = timedelta(microseconds=1)
    if kind == "past":
        return kafka_time - draw(st.integers(0, 3 * 365 * 86400 * 10**6)) * micros
    if kind == "recent":
        return kafka_time - draw(st.integers(0, 600 * 10**6)) * micros
    if kind == "ahead":
        return kafka_time + draw(st.integers(0, int(SKEW / micros))) * micros
    if kind == "at_skew":
        return kafka_time + SKEW
    return datetime(draw(st.integers(1000, 1969)), 6, 1, tzinfo=timezone.utc)


@st.composite
def amounts(draw) -> str:
    whole = draw(st.sampled_from([0, 1, 129, 10**15, 10**16 - 1]) | st.integers(0, 10**16 - 1))
    places = draw(st.integers(0, 2))
    cents = draw(st.integers(0, 10**places - 1)) if places else 0
    return f"{whole}" + (f".{cents:0{places}d}" if places else "")


@st.composite
def valid_drafts(draw, ancient: bool = False) -> Draft:
    topic = draw(st.sampled_from(list(TOPICS)))
    kafka_time = T0 + draw(st.integers(-86400_000, 86400_000)) * timedelta(milliseconds=1)
    key = draw(st.sampled_from(["k1", "o-00042"]) | strings().filter(bool))
    occurred = draw(rfc3339(draw(event_times(kafka_time, ancient))))
    event_id = draw(st.sampled_from(["e", "evt-"]) | strings(4)) + ID
    members = [("event_id", draw(json_string(event_id)))]
    if topic == "orders":
        event_type = draw(st.sampled_from(ORDER_TYPES))
        members += [("event_type", json.dumps(event_type)),
                    ("order_id", draw(json_string(key))),
                    ("sequence", str(draw(st.integers(*BIGINT)))),
                    ("occurred_at", json.dumps(occurred))]
        state = {"customer_id": draw(json_string(draw(strings()))),
                 "status": draw(json_string(draw(st.sampled_from(["paid", ""]) | strings()))),
                 "amount": json.dumps(draw(amounts())),
                 "currency": draw(json_string(draw(st.sampled_from(["EUR", "USD"])))),
                 }
        if event_type == "order_deleted":  # a delete carries all, some or none of the state
            state = {k: v if draw(st.booleans()) else "null" for k, v in state.items()
                     if draw(st.booleans())}
        members += list(state.items())
    else:
        members += [("event_type", json.dumps("xp_granted")),
                    ("player_id", draw(json_string(key))),
                    ("xp", str(draw(st.integers(1, INT[1])))),
                    ("occurred_at", json.dumps(occurred))]
        reason = draw(st.sampled_from(["quest", None, "null"]) | strings())
        if reason is not None:
            members.append(("reason", reason if reason == "null" else draw(json_string(reason))))
    members = draw(st.permutations(members))  # field order is free
    return Draft(topic, key, kafka_time, [(json.dumps(n), v) for n, v in members])


# --- Mutations -------------------------------------------------------------------------------

OTHER_JSON = ["1", "-7", "0", "1.5", "1.0", "1e2", "true", "false", "null", '"x"', '"42"',
              '""', "[]", "[1]", "{}", '{"a": 1}', '"2026-11-21T10:00:00Z"', '"10.00"']


def _field(draw, draft: Draft) -> str:
    names = [json.loads(n) for n, _ in draft.members]
    return draw(st.sampled_from(names)) if names else "event_id"


def type_swap(draw, d: Draft):
    name = _field(draw, d)
    d.set(name, draw(st.sampled_from(OTHER_JSON)))
    return name


def nested(draw, d: Draft):
    name = _field(draw, d)
    value = d.get(name) or "1"
    d.set(name, draw(st.sampled_from([f'{{"value": {value}}}', f"[{value}]"])))
    return name


def numbers(draw, d: Draft):
    """Extra digits and other spellings of a number, in range and out of it."""
    if d.topic == "orders":
        name = draw(st.sampled_from(["sequence", "amount"]))
    else:
        name = "xp"
    if name == "amount":
        amount = json.loads(d.get("amount") or '"1.00"') or "1.00"
        if not isinstance(amount, str):
            amount = "1.00"
        choices = [amount + draw(st.sampled_from(["0", "1", "99", "000"])),
                   amount.split(".")[0] + "." + "0" * draw(st.integers(3, 8)),
                   "0" + amount, "+" + amount, " " + amount, amount + " ", amount + "\n",
                   "-" + amount, "-0", "-0.00", "1" * draw(st.integers(17, 20)) + ".00",
                   "9999999999999999.99", "0.5", "5", ".5", "5.", "1e2", "1,00", "NaN"]
        d.set("amount", json.dumps(draw(st.sampled_from(choices))))
        return "amount"
    low, high = BIGINT if name == "sequence" else (1, INT[1])
    n = draw(st.sampled_from([low, high, low - 1, high + 1, 0, -1, INT[1] + 1, 10**30]) |
             st.integers(low - 10, high + 10))
    spelling = draw(st.sampled_from(["{}", "{}", "{}.0", "{}e0", "{}.00", '"{}"', "-{}"]))
    d.set(name, spelling.format(n))
    return f"{name}={spelling.format(n)}"


def encodings(draw, d: Draft):
    """Escaped and raw characters in a string field; valid ones and broken ones."""
    name = draw(st.sampled_from(["event_id", "event_type", d.topic == "orders" and "status"
                                 or "reason"]))
    text = d.get(name)
    if text is None or not text.startswith('"'):
        text = '"x"'
    inner = text[1:-1]
    piece = draw(st.sampled_from([
        "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\udc00x", "\\u0000", "\\u0001", "\x01",
        "\t", "\\/", "\\\\", '\\"', "\u00e9", "\U0001f600", "\u2028", "\ufeff", "\\x41",
        "\\u12", "\\'"]))
    at = draw(st.integers(0, len(inner)))
    if ID in inner and inner.index(ID) < at < inner.index(ID) + len(ID):
        at = inner.index(ID)  # never inside the placeholder: valid event_ids stay unique
    d.set(name, '"' + inner[:at] + piece + inner[at:] + '"')
    return f"{name}:{piece!r}"


def duplicate(draw, d: Draft):
    if not d.members:
        return "nothing"
    n, v = draw(st.sampled_from(d.members))
    again = draw(st.sampled_from([v, "1", '"x"', "null"]))
    name = json.loads(n)
    spelled = draw(st.sampled_from([n, n, '"' + "".join(f"\\u{ord(c):04x}" for c in name[:1])
                                    + name[1:] + '"']))
    d.members.insert(draw(st.integers(0, len(d.members))), (spelled, again))
    return name


def missing(draw, d: Draft):
    name = _field(draw, d)
    d.set(name, None)
    return name


def null_field(draw, d: Draft):
    name = _field(draw, d)
    d.set(name, "null")
    return name


def edges(draw, d: Draft):
    """Bytes around the object: whitespace is fine, anything else is not."""
    where = draw(st.sampled_from(["prefix", "suffix", "suffix"]))
    extra = draw(st.sampled_from([" ", "\n", "\t\r\n", " x", "x", "{}", ",", "]", "}", "\x00",
                                  "//c", "/* c */", "\ufeff", "\xa0", "\x0b", "\x0c", "null",
                                  '{"event_id": "e"}']))
    setattr(d, where, getattr(d, where) + extra)
    return f"{where}={extra!r}"


def timestamps(draw, d: Draft):
    base = json.loads(d.get("occurred_at") or '"2026-11-21T10:00:00Z"')
    if not isinstance(base, str) or len(base) < 19:
        base = "2026-11-21T10:00:00Z"
    day, clock = base[:10], base[11:19]
    millis = int(d.kafka_time.timestamp() * 1000)
    form = draw(st.sampled_from([
        f'"{day}"', f'"{day}T{clock}"', f'"{day} {clock}Z"', f'"{day}t{clock}z"', str(millis),
        f'"{millis}"', str(millis // 1000), f'"{day}T{clock}.1234567Z"', f'"{day}T{clock}+14:01"',
        f'"{day}T{clock}+15:00"', f'"{day}T{clock}-14:00"', f'"{day}T{clock}+0100"',
        f'"{day}T24:00:00Z"', f'"{day}T{clock[:5]}:60Z"', '"2026-02-29T10:00:00Z"',
        '"2024-02-29T10:00:00Z"', '"2026-04-31T10:00:00Z"', '"0999-12-31T10:00:00Z"',
        '"1000-01-01T00:00:00+14:00"', '"10000-01-01T00:00:00Z"', f'"{day}T{clock}Z\\n"',
        f'"{day}T{clock}.Z"', f'"{day}T{clock[:5]}Z"', f'"+{day}T{clock}Z"', '"yesterday"',
        '""']))
    d.set("occurred_at", form)
    return form


def far_future(draw, d: Draft):
    k = d.kafka_time
    moment = draw(st.sampled_from([
        k + SKEW + timedelta(microseconds=1), k + SKEW + timedelta(seconds=1),
        k + timedelta(days=1), datetime(2099, 1, 1, tzinfo=timezone.utc),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)]))
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + draw(st.sampled_from(["Z", "+00:00"]))
    d.set("occurred_at", json.dumps(text))
    return text


def keys(draw, d: Draft):
    d.key = draw(st.sampled_from([None, "", d.key + "x" if d.key else "x", (d.key or "").upper()]))
    return repr(d.key)


def unknown_field(draw, d: Draft):
    """A field the contract does not name: valid, kept aside in RESCUED_FIELDS."""
    name = draw(st.sampled_from(["extra", "Event_ID", "eventId", "event_id ", ""]))
    value = draw(st.sampled_from(["1", '"SAVE10"', '{"a":[1,2.50]}', "null", "-0.0"]))
    d.members.insert(draw(st.integers(0, len(d.members))), (json.dumps(name), value))
    return f"{name}={value}"


def not_an_object(draw, d: Draft):
    choice = draw(st.sampled_from(["array", "string", "null", "number", "empty", "garbage",
                                   "cut", "no value", "other topic"]))
    text = "{" + ",".join(f"{n}:{v}" for n, v in d.members) + "}"
    if choice == "no value":
        d.no_value = True
    elif choice == "other topic":  # a valid event of the other topic
        d.topic = "orders" if d.topic == "player-rewards" else "player-rewards"
    else:
        d.whole = {"array": f"[{text}]", "string": json.dumps(text), "null": "null",
                   "number": "12", "empty": "", "garbage": "{not json",
                   "cut": text[:draw(st.integers(0, max(len(text) - 1, 0)))]}[choice]
    return choice


def event_types(draw, d: Draft):
    if d.topic == "orders":
        kind = draw(st.sampled_from(ORDER_TYPES + ["order_shipped", "ORDER_CREATED"]))
        d.set("event_type", json.dumps(kind))
        if kind == "order_deleted":
            for name in STATE:
                if draw(st.booleans()):
                    d.set(name, None)
    else:
        kind = draw(st.sampled_from(["xp_revoked", "XP_GRANTED", "xp_granted "]))
        d.set("event_type", json.dumps(kind))
    return kind


MUTATIONS = [type_swap, nested, numbers, encodings, duplicate, missing, null_field, edges,
             timestamps, far_future, keys, unknown_field, not_an_object, event_types]


spacing = st.lists(st.sampled_from(["", "", " ", "\n", "\t", "\r\n"]), min_size=1, max_size=4)


@st.composite
def drafts(draw, mutation, ancient: bool = False, bytes_too: bool = False) -> Draft:
    """A valid event, broken by `mutation` (if any) and maybe one more."""
    d = draw(valid_drafts(ancient))
    more = draw(st.lists(st.sampled_from(MUTATIONS), max_size=1))
    for change in ([mutation] if mutation else []) + more:
        d.how.append(f"{change.__name__}({change(draw, d)})")
    if bytes_too and draw(st.booleans()):
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80",
                                    b"\xf4\x90\x80\x80", b"\xe2\x82"]))
        d.bad_bytes = (draw(st.integers(0, 400)), bad)
        d.how.append(f"bytes({bad!r})")
    return d


def generated(count: int, **kwargs) -> list[Record]:
    """About `count` records from Hypothesis, numbered in the order drawn.

    Each example is a batch with one record per kind of mutation and a few unmutated ones, so
    every kind gets its share; Hypothesis's own choice of kinds is too uneven for one modest run.
    """
    kinds = [None] * 4 + MUTATIONS
    batch = st.tuples(*[st.tuples(drafts(kind, **kwargs), spacing) for kind in kinds])
    drawn = []

    @settings(max_examples=-(-count // len(kinds)), database=None, deadline=None,
              phases=[Phase.generate], derandomize=EXAMPLES_KNOB not in os.environ,
              suppress_health_check=list(HealthCheck))
    @given(batch)
    def collect(records):
        drawn.extend(records)

    collect()
    return [render(d, i, spaces) for i, (d, spaces) in enumerate(drawn)]


# --- Judging ---------------------------------------------------------------------------------

def _expected(topic_settings, event: dict) -> dict:
    """The silver columns the oracle's event must give: exact values."""
    row = {}
    for f in event_schema(topic_settings):
        value = event.get(f.name)
        if value is not None and f.name == "occurred_at":
            value = instant(value).replace(tzinfo=None)
        elif value is not None and f.dataType.simpleString().startswith("decimal"):
            value = Decimal(value)
        row[f.name] = value
    # What the contract does not name is kept aside, exactly; a null field counts as absent.
    rescued = {name: value for name, value in event.items()
               if name not in row and value is not None}
    row[RESCUED_FIELDS] = rescued or None
    return row


def check(records: list[Record], offsets: list[int], silver: dict[str, dict],
          quarantine: dict[tuple[str, int], list[str]], conf,
          deduplicated: bool = False) -> tuple[list[str], dict]:
    """Every record against the oracle; the problems found, and counts of what was seen.

    `deduplicated`: silver is the streaming table, which keeps one delivery of each record
    (same event_id, same bytes, and on a topic with `max_event_age` the same lateness) and drops
    the others as redeliveries; they are in neither table. Nothing valid is dropped for its age
    (silver's watermark follows ingestion time, docs/guarantees.md).
    """
    validators = {t: validator(t) for t in TOPICS}
    problems, seen, deliveries = [], {}, {}
    for record, offset in zip(records, offsets, strict=True):
        verdict = judge(record.topic, record.key, record.value, record.kafka_time, SKEW,
                        validators)
        at = (record.topic, offset)
        row, errors = silver.get(at), quarantine.get(at)
        where = f"{record.topic}@{offset} {record.how}: key={record.key!r} value={record.value!r}"
        kind = verdict.why or "valid"
        if verdict.valid:
            if errors is not None:
                problems.append(f"valid, but quarantined: {errors} {where}")
            max_age = conf.topic(TOPICS[record.topic]).max_event_age
            late = bool(max_age) and instant(verdict.event["occurred_at"]) \
                < record.kafka_time - MAX_EVENT_AGE
            same_record = (record.topic, verdict.event["event_id"], record.value, late)
            deliveries.setdefault(same_record, []).append((verdict.event, row, where))
        elif row is not None or not errors:
            problems.append(f"{kind}, but silver={row is not None} quarantine={errors} {where}")
        elif not _names_the_right_kind(verdict, errors):
            problems.append(f"{kind}, but errors={errors} {where}")
        seen[kind] = seen.get(kind, 0) + 1
    for (topic, *_), group in deliveries.items():
        in_silver = [(event, row, where) for event, row, where in group if row is not None]
        if len(in_silver) != (1 if deduplicated else len(group)):
            problems.append(f"{len(group)} valid deliveries, {len(in_silver)} in silver: "
                            + " | ".join(where for _, _, where in group))
        for event, row, where in in_silver:
            expected = _expected(conf.topic(TOPICS[topic]), event)
            # Spark hands timestamps over as naive local times; the oracle's are naive UTC.
            got = {name: utc(value).replace(tzinfo=None) if isinstance(value, datetime) else value
                   for name, value in ((name, row[name]) for name in expected)}
            if got[RESCUED_FIELDS] is not None:
                got[RESCUED_FIELDS] = json.loads(got[RESCUED_FIELDS], parse_float=Decimal)
            if got != expected:
                problems.append(f"changed: {got} != {expected} {where}")
    return problems, seen


def _names_the_right_kind(verdict: Verdict, errors: list[str]) -> bool:
    """Unreadable values have one reason that says so; readable objects have none of those."""
    unreadable = [e for e in errors if e in UNREADABLE]
    if verdict.why == NOT_UTF8:
        return errors == [INVALID_UTF8]
    if verdict.why == NOT_JSON:
        return len(errors) == 1 and unreadable == errors
    if verdict.why == NOT_AN_OBJECT:
        return errors == [MALFORMED_JSON]
    return not unreadable  # an object breaking the schema or a rule: its fields are checked


def _silver_rows(tables_by_topic: dict[str, list]) -> dict[tuple[str, int], dict]:
    return {(topic, r["kafka_offset"]): r.asDict() for topic, rows in tables_by_topic.items()
            for r in rows}


def _report(problems: list[str], seen: dict, count: int) -> None:
    print(f"{count} records: {seen}")
    assert not problems, f"{len(problems)} of {count} records:\n" + "\n".join(problems[:15])


def test_the_pipeline_agrees_with_the_oracle_on_every_record(spark, settings, tmp_path):
    """The real pipeline files (bronze, parsed_*, silver_*, quarantine) over a kcat file: one
    update. kcat carries a value as text, so these are all UTF-8; the next test feeds bytes."""
    records = generated(EXAMPLES)
    offsets, kcat = {t: 0 for t in TOPICS}, []
    for r in records:
        kcat.append(KafkaRecord(r.topic, r.key, None if r.value is None else r.value.decode(),
                                partition=0, offset=offsets[r.topic],
                                timestamp_ms=int(r.kafka_time.timestamp() * 1000)))
        offsets[r.topic] += 1
    tables = run_silver(spark, [kcat], tmp_path)
    assert len(tables["bronze_kafka_events"]) == len(records)
    silver = _silver_rows({"orders": tables["silver_orders"],
                           "player-rewards": tables["silver_player_rewards"]})
    quarantine = {(r["kafka_topic"], r["kafka_offset"]): r["errors"]
                  for r in tables["quarantine"]}
    problems, seen = check(records, [k.offset for k in kcat], silver, quarantine, settings,
                           deduplicated=True)
    _report(problems, seen, len(records))
    assert seen["valid"] >= len(records) // 10 and len(seen) >= 6, seen  # both kinds, often


def test_the_transforms_agree_with_the_oracle_on_raw_bytes(spark, settings):
    """Raw Kafka bytes, some not UTF-8, and more event times back to year 1000, through the
    transforms the pipeline files compose: parse_events, then well_formed_events and the rules'
    expectations (silver_frames.checked_events; no watermark here) / quarantined_records."""
    records = generated(EXAMPLES, ancient=True, bytes_too=True)
    rows = [(None if r.key is None else r.key.encode(), r.value, r.topic, 0, i, r.kafka_time,
             0, []) for i, r in enumerate(records)]
    bronze = with_ingestion_time(spark.createDataFrame(rows, KAFKA_SCHEMA))
    silver, quarantine = {}, {}
    for kafka_topic, name in TOPICS.items():
        topic = settings.topic(name)
        parsed = parse_events(bronze, topic)
        silver |= _silver_rows({kafka_topic: checked_events(parsed, topic).collect()})
        quarantine |= {(r["kafka_topic"], r["kafka_offset"]): r["errors"]
                       for r in quarantined_records(parsed, topic).collect()}
    problems, seen = check(records, list(range(len(records))), silver, quarantine, settings)
    _report(problems, seen, len(records))
    assert seen.get(NOT_UTF8, 0) > 0 and seen["valid"] > 0, seen
