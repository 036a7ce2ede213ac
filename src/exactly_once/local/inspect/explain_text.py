"""An explanation (explain.py) as a person reads it, and as JSON for tools.

Text: a heading, one block per delivery in log order (where Kafka stored it, its event, the
verdict, what the history or a table adds), then the key's rows in each gold table and the
Delta versions read. JSON: the same, every field named (`as_json`), values as JSON types
(timestamps ISO 8601 in UTC, decimals as strings).
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from exactly_once.local.inspect.delivery import Delivery, iso_utc
from exactly_once.local.inspect.explain import Explanation

VALUE_SHOWN = 60  # characters of a quarantined value the text shows


def plain(value: Any) -> Any:
    """A row's value as JSON holds it."""
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value


def delivery_dict(delivery: Delivery) -> dict[str, Any]:
    verdict = delivery.verdict
    assert verdict is not None
    return {
        "topic": delivery.topic, "partition": delivery.partition, "offset": delivery.offset,
        "timestamp": plain(delivery.timestamp), "ingested_at": plain(delivery.ingested_at),
        "key": delivery.key, "event": plain(delivery.event), "value": delivery.value,
        "verdict": {
            "kind": verdict.kind, "text": verdict.text, "decided_by": verdict.decided_by,
            "reasons": list(verdict.reasons),
            "of": None if verdict.of is None else
            {"partition": verdict.of[0], "offset": verdict.of[1]},
            "lost_to": plain(verdict.lost_to)},
        "notes": list(delivery.notes),
    }


def as_dict(explanation: Explanation) -> dict[str, Any]:
    return {
        "table": explanation.table, "topic": explanation.topic.dataset_suffix,
        "kafka_topic": explanation.topic.kafka_topic, "key_column": explanation.topic.key,
        "key": explanation.key, "event_id": explanation.event_id,
        "deliveries": [delivery_dict(d) for d in explanation.deliveries],
        "gold": [{"table": g.table, "summary": g.summary, "rows": plain(g.rows)}
                 for g in explanation.gold],
        "notes": list(explanation.notes),
        "versions": dict(explanation.versions),
    }


def as_json(explanation: Explanation) -> str:
    return json.dumps(as_dict(explanation), indent=2, ensure_ascii=False)


def moment(value: datetime | None) -> str:
    return "?" if value is None else iso_utc(value)


def event_line(delivery: Delivery) -> str:
    event = delivery.event
    if not event:
        value = delivery.value if delivery.value is not None else "(no value)"
        shown = value if len(value) <= VALUE_SHOWN else value[:VALUE_SHOWN] + "..."
        return f"value {json.dumps(shown, ensure_ascii=False)}"
    parts = [str(event.get("event_type"))]
    for name in ("sequence", "status", "amount", "xp"):
        if event.get(name) is not None:
            parts.append(f"{name} {plain(event[name])}")
    parts.append(f"event {event.get('event_id')}")
    return ", ".join(parts)


def cell(value: Any) -> str:
    value = plain(value)
    if isinstance(value, dict):
        return "(" + ", ".join(str(v) for v in value.values()) + ")"
    return "NULL" if value is None else str(value)


def table_lines(rows: list[dict[str, Any]], indent: str = "    ") -> list[str]:
    """Rows as an aligned table, columns in row order."""
    if not rows:
        return []
    columns = list(rows[0])
    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = [indent + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
            .rstrip()]
    return line + [indent + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True))
                   .rstrip() for row in cells]


def heading(explanation: Explanation) -> str:
    """`order_id o-1: 5 deliveries on topic orders, in log order`."""
    topic = explanation.topic
    subject = (f"event {explanation.event_id} ({topic.key} {explanation.key})"
               if explanation.event_id else f"{topic.key} {explanation.key}")
    count = len(explanation.deliveries)
    return (f"{subject}: {count} deliver{'y' if count == 1 else 'ies'} on topic "
            f"{topic.kafka_topic}, in log order")


def as_text(explanation: Explanation) -> str:
    lines = [f"{heading(explanation)} (partition@offset, Kafka timestamp, event)"]
    for delivery in explanation.deliveries:
        verdict = delivery.verdict
        assert verdict is not None
        key = "" if delivery.key == explanation.key else \
            f"  key {delivery.key if delivery.key is not None else 'NULL'}"
        lines.append(f"  {delivery.position.split('/', 1)[1]}  {moment(delivery.timestamp)}"
                     f"{key}  {event_line(delivery)}")
        lines.append(f"      {verdict.kind.upper()}: {verdict.text}")
        lines += [f"      {note}" for note in delivery.notes]
    lines.append("gold:")
    for gold in explanation.gold:
        lines.append(f"  {gold.table}: {gold.summary}")
        lines += table_lines(gold.rows)
    lines += [f"note: {note}" for note in explanation.notes]
    lines.append("read at Delta versions: " + ", ".join(
        f"{name} {version}" if version >= 0 else f"{name} (none yet)"
        for name, version in explanation.versions.items()))
    return "\n".join(lines)
