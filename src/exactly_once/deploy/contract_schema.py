"""The published contract, `conf/<kafka topic>.schema.json` (JSON Schema, draft 2020-12), kept in
step with `topics.<topic>` in conf/: `make bundle-config` rewrites the files, `python -m
exactly_once.deploy check` (and tests/test_contract.py) says when one is stale.

What conf/ decides is written from it; what a person wrote is kept:
- `properties` lists the fields of `topics.<topic>.schema`, in its order. A field's property is
  kept as written (its description, an enum, a tighter bound) while its type is the same; a
  field that is new, or whose type changed, gets the property its type reads
  (settings/contract.py), bounded by the topic's rules where a rule says so plainly (`x > 0`,
  `x <> ''`, the `known_event_type` rule's values);
- `required` is every field a rule requires at its top level (`field IS NOT NULL`, a conjunct
  of the rule); the others may be null or absent;
- a field gone from the contract is gone from the document, its conditional parts included.

A topic without a schema file gets one with the same skeleton as the others.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from exactly_once.paths import CONF_DIR
from exactly_once.settings.contract import (
    INTEGER_BOUNDS,
    NEGATIVE_ZERO,
    TIMESTAMP_PATTERN,
    ContractField,
    contract_fields,
    decimal_pattern,
)
from exactly_once.settings.pipeline import TopicSettings, load_settings
from exactly_once.settings.values import PREFIX

COMMENT = (
    "Enforced by the pipeline (src/exactly_once/transforms/silver.py, conf/base.yml); "
    "tests/test_contract.py checks that the two agree. Beyond this schema: the value is one "
    "UTF-8 JSON object with no repeated field name and nothing after it; integers are integer "
    "literals (7, not 7.0 or 7e0); the record's Kafka key equals the entity ID; occurred_at is "
    "at most topics.<topic>.max_clock_skew (5 minutes) after the record's Kafka timestamp. "
    "A field the schema does not name is accepted: the pipeline keeps it aside "
    "(`rescued_fields` in silver) until the contract names it. "
    "`(?!\\n)$` ends a pattern at the end of the text also in regex engines where `$` matches "
    "before a final line break.")
# The keys of a property that its type decides; the others (description, enum, ...) are a
# person's, or a rule's.
TYPE_KEYS = ("type", "minimum", "maximum", "pattern", "format")


def schema_path(topic: TopicSettings, conf_dir: Path = CONF_DIR) -> Path:
    return conf_dir / f"{topic.kafka_topic}.schema.json"


def portable(pattern: str) -> str:
    """A pipeline (Java) pattern as the schema writes it: `\\z` is not in JSON Schema's regex
    dialect; `(?!\\n)$` means the same in it, in Python and in Java."""
    return pattern.removesuffix(r"\z") + r"(?!\n)$"


def _json_type(field: ContractField) -> str:
    return "integer" if field.type in INTEGER_BOUNDS else "string"


def type_property(field: ContractField) -> dict[str, Any]:
    """The property of a field's type alone (any value of it, nullability aside)."""
    prop: dict[str, Any] = {"type": _json_type(field)}
    if field.type in INTEGER_BOUNDS:
        prop["minimum"], prop["maximum"] = INTEGER_BOUNDS[field.type]
    elif field.type == "timestamp":
        prop |= {"format": "date-time", "pattern": portable(TIMESTAMP_PATTERN)}
    elif field.decimal:  # signed, as the parse reads it; never `-0`
        unsigned = portable(decimal_pattern(*field.decimal)).removeprefix("^")
        zero = NEGATIVE_ZERO.removeprefix("^").removesuffix(r"\z")
        prop["pattern"] = f"^(?!{zero}(?!\\n)$)-?{unsigned}"
    return prop


def _conjuncts(sql: str) -> list[str]:
    """The top-level AND terms of a rule (not inside parentheses), whitespace normalised."""
    terms, depth, start = [], 0, 0
    text = " ".join(sql.split())
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text[i:i + 5].upper() == " AND ":
            terms.append(text[start:i])
            start = i + 5
    return [t.strip() for t in [*terms, text[start:]]]


def required_fields(topic: TopicSettings, fields: list[ContractField]) -> list[str]:
    """The fields a rule requires at its top level (`field IS NOT NULL`), in contract order."""
    named = {term[:-len(" IS NOT NULL")].strip().lower()
             for sql in topic.rules.values() for term in _conjuncts(sql)
             if term.upper().endswith(" IS NOT NULL")}
    return [f.name for f in fields if f.name.lower() in named]


def _rule_bounds(topic: TopicSettings, field: ContractField) -> dict[str, Any]:
    """What the topic's rules say plainly of a new field: `x > n` / `x >= n` (a minimum),
    `x <> ''` (not empty), the `known_event_type` rule's values (an enum of `event_type`)."""
    bounds: dict[str, Any] = {}
    name = re.escape(field.name)
    for rule, sql in topic.rules.items():
        for term in _conjuncts(sql):
            if found := re.fullmatch(rf"{name}\s*(>=?)\s*(-?\d+)", term, re.IGNORECASE):
                bounds["minimum"] = int(found[2]) + (found[1] == ">")
            elif re.fullmatch(rf"{name}\s*<>\s*''", term, re.IGNORECASE):
                bounds["minLength"] = 1
            if field.name == topic.key and re.fullmatch(r"kafka_key\s*<>\s*''", term):
                bounds["minLength"] = 1  # the key equals a Kafka key that is not empty
        if rule == "known_event_type" and field.name == "event_type":
            bounds["enum"] = re.findall(r"'([^']*)'", sql)
    return bounds


def _same_type(prop: dict[str, Any], field: ContractField) -> bool:
    """Whether a written property still describes the field's type (a rule's tighter bound or
    pattern aside)."""
    kinds = prop.get("type")
    kinds = {kinds} if isinstance(kinds, str) else set(kinds or ())
    wanted = type_property(field)
    if kinds - {"null"} != {wanted["type"]}:
        return False
    if field.type in INTEGER_BOUNDS:
        return prop.get("maximum") == wanted["maximum"]
    if field.decimal:
        unsigned = portable(decimal_pattern(*field.decimal))
        return prop.get("pattern") in (unsigned, wanted["pattern"])
    return prop.get("pattern") == wanted.get("pattern")


def _property(topic: TopicSettings, field: ContractField, written: dict[str, Any] | None,
              required: bool) -> dict[str, Any]:
    if written is not None and _same_type(written, field):
        prop = dict(written)
    else:
        person = {k: v for k, v in (written or {}).items() if k not in TYPE_KEYS}
        prop = {**type_property(field), **_rule_bounds(topic, field), **person}
        if written and field.type in INTEGER_BOUNDS:
            low = INTEGER_BOUNDS[field.type][0]
            if written.get("minimum", low) > low:  # a rule's bound, kept
                prop["minimum"] = written["minimum"]
    kind = _json_type(field)
    prop["type"] = kind if required else [kind, "null"]
    ordered = {key: prop[key] for key in ("type", *(k for k in prop if k != "type"))}
    return ordered


def skeleton(topic: TopicSettings) -> dict[str, Any]:
    """The document of a topic that has none yet."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:exactly-once-lakehouse:contract:{topic.kafka_topic}",
        "title": topic.kafka_topic,
        "description": f"The value of a record on Kafka topic `{topic.kafka_topic}` "
                       f"(key: {topic.key}).",
        "$comment": COMMENT,
        "type": "object",
        "additionalProperties": True,
        "required": [],
        "properties": {},
    }


def render(topic: TopicSettings, written: dict[str, Any] | None) -> dict[str, Any]:
    """The topic's document: `written` (the file as it is; None when there is none) kept in
    step with conf/ (the module docstring)."""
    fields = contract_fields(topic.schema, f"{PREFIX}.topics.{topic.dataset_suffix}.schema")
    doc = dict(written) if written is not None else skeleton(topic)
    required = required_fields(topic, fields)
    props = doc.get("properties") or {}
    doc["required"] = required
    doc["properties"] = {f.name: _property(topic, f, props.get(f.name), f.name in required)
                         for f in fields}
    names = set(doc["properties"])
    if isinstance(doc.get("else"), dict):  # conditional requirements of fields still there
        branch = dict(doc["else"])
        if "required" in branch:
            branch["required"] = [n for n in branch["required"] if n in names]
        if "properties" in branch:
            branch["properties"] = {n: p for n, p in branch["properties"].items() if n in names}
        doc["else"] = branch
    return doc


def text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _written(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def documents(conf_dir: Path = CONF_DIR) -> dict[Path, str]:
    """Each topic's schema file and the text it should hold (conf/'s `local` target: the
    contract is the same in every target)."""
    settings = load_settings("local", conf_dir)
    return {schema_path(t, conf_dir): text(render(t, _written(schema_path(t, conf_dir))))
            for t in settings.topics.values()}


def write(conf_dir: Path = CONF_DIR) -> list[Path]:
    """Rewrite the schema files that are stale; the ones written."""
    stale = [path for path, content in documents(conf_dir).items()
             if not path.is_file() or path.read_text() != content]
    for path in stale:
        path.write_text(documents(conf_dir)[path])
    return stale


def problems(conf_dir: Path = CONF_DIR) -> list[str]:
    return [f"{path.relative_to(conf_dir.parent)} is stale: run `make bundle-config`"
            for path, content in documents(conf_dir).items()
            if not path.is_file() or path.read_text() != content]
