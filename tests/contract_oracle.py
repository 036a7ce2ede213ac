"""An independent judge of the event contract: is a Kafka record valid, and what does it say?

Written from the published contract (conf/<topic>.schema.json and docs/contract.md),
never from the Spark code: strict JSON decoding in Python, the JSON Schema evaluated by the
`jsonschema` library with `date-time` format checking, and the two checks a schema cannot
express (the Kafka key is the entity ID; occurred_at is at most max_clock_skew after the
record's Kafka timestamp).

Numbers are decoded exactly (`parse_float=Decimal`): a float would turn 0.10000000000000000001
into 0.1 and make 1.0 an integer. So for `jsonschema` an integer is what JSON writes as an
integer literal, and `1.0` or `1e2` is a number that is not one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from jsonschema import Draft202012Validator

CONF = Path(__file__).resolve().parent.parent / "conf"
ENTITY = {"orders": "order_id", "player-rewards": "player_id"}  # Kafka topic -> key field

# Why a record is invalid, from the outside in.
NOT_UTF8 = "not UTF-8"
NOT_JSON = "not one strict JSON value"  # syntax, trailing content, repeated names, NaN, ...
NOT_AN_OBJECT = "JSON, but not an object"
SCHEMA = "breaks the JSON Schema"
KEY = "Kafka key is not the entity ID"
FUTURE = "occurred_at too far after the Kafka timestamp"


def schema(topic: str) -> dict:
    return json.loads((CONF / f"{topic}.schema.json").read_text())


def validator(topic: str) -> Draft202012Validator:
    checker = Draft202012Validator.FORMAT_CHECKER
    # jsonschema checks `date-time` only when rfc3339-validator is installed, and skips it
    # silently otherwise: a judge that cannot see bad timestamps is no judge.
    assert "date-time" in checker.checkers, "pip install rfc3339-validator (a dev dependency)"
    return Draft202012Validator(schema(topic), format_checker=checker)


class _Rejected(ValueError):
    pass


def _unique_names(pairs: list[tuple[str, object]]) -> dict:
    names = [name for name, _ in pairs]
    if len(names) != len(set(names)):
        raise _Rejected("a field name appears twice")
    return dict(pairs)


def _no_constant(name: str):
    raise _Rejected(f"{name} is not JSON")


def _unicode(value) -> None:
    """Strings must be Unicode: Python decodes an escaped lone surrogate ("\\ud800"), JSON's
    data model has no such character."""
    if isinstance(value, str):
        value.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate
    elif isinstance(value, dict):
        for name, item in value.items():
            _unicode(name)
            _unicode(item)
    elif isinstance(value, list):
        for item in value:
            _unicode(item)


def strict_json(value: bytes):
    """The one JSON value of UTF-8 `value` (json.loads itself rejects anything after it)."""
    document = json.loads(value.decode("utf-8"), object_pairs_hook=_unique_names,
                          parse_float=Decimal, parse_constant=_no_constant)
    _unicode(document)
    return document


def instant(rfc3339: str) -> datetime | None:
    """The UTC instant of a valid RFC 3339 date-time; None when it is past year 9999 in UTC."""
    try:
        return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).astimezone(timezone.utc)
    except OverflowError:
        return None


@dataclass(frozen=True)
class Verdict:
    event: dict | None  # the event's fields when the record is valid
    why: str | None  # the first reason it is not

    @property
    def valid(self) -> bool:
        return self.why is None


def judge(topic: str, key: str | None, value: bytes | None, kafka_timestamp: datetime,
          max_clock_skew: timedelta, validators: dict[str, Draft202012Validator]) -> Verdict:
    if value is None:
        return Verdict(None, NOT_JSON)
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return Verdict(None, NOT_UTF8)
    try:
        document = strict_json(value)
    except (ValueError, UnicodeEncodeError, RecursionError):  # JSONDecodeError is a ValueError
        return Verdict(None, NOT_JSON)
    if not isinstance(document, dict):
        return Verdict(None, NOT_AN_OBJECT)
    if not validators[topic].is_valid(document):
        return Verdict(None, SCHEMA)
    if key is None or key == "" or document[ENTITY[topic]] != key:
        return Verdict(None, KEY)
    moment = instant(document["occurred_at"])
    if moment is None or moment > kafka_timestamp + max_clock_skew:
        return Verdict(None, FUTURE)
    return Verdict(document, None)
