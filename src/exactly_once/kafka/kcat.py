"""Kafka records in the envelope `kcat -C -J` prints: one JSON object per line.

    {"topic": "orders", "partition": 0, "offset": 42, "tstype": "create", "ts": 1793491200123,
     "broker": 1, "headers": ["producer", "generator", "attempt", "1"],
     "key": "o-00001", "payload": "{\\"event_id\\": ...}"}

Headers are a flat [name, value, name, value, ...] list; key, payload and header values may be
null. Files in this format can be captured from a real topic with kcat, replayed into a broker
with `producer.produce_records`, or fed to tests without any broker at all.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from exactly_once.errors import KcatFormatError


@dataclass(frozen=True)
class KafkaRecord:
    topic: str
    key: str | None
    payload: str | None
    partition: int | None = None
    offset: int | None = None
    timestamp_ms: int | None = None
    headers: tuple[tuple[str, str | None], ...] = ()


def to_kcat_dict(record: KafkaRecord) -> dict[str, Any]:
    """The envelope of one record; unknown partition/offset/timestamp are left out."""
    envelope: dict[str, Any] = {"topic": record.topic}
    if record.partition is not None:
        envelope["partition"] = record.partition
    if record.offset is not None:
        envelope["offset"] = record.offset
    if record.timestamp_ms is not None:
        envelope["tstype"] = "create"
        envelope["ts"] = record.timestamp_ms
    if record.headers:
        envelope["headers"] = [part for header in record.headers for part in header]
    envelope["key"] = record.key
    envelope["payload"] = record.payload
    return envelope


def as_consumed(records: Iterable[KafkaRecord]) -> list[KafkaRecord]:
    """The records as a broker would store them, in order: partition 0 of their topic and
    consecutive offsets from 0 per topic, as `kcat -C -J` then prints them. For files that stand
    in for a topic, where downstream lineage and ordering need real positions."""
    offsets: dict[str, int] = {}
    consumed = []
    for record in records:
        offset = offsets[record.topic] = offsets.get(record.topic, -1) + 1
        consumed.append(replace(record, partition=0, offset=offset))
    return consumed


def _optional_int(envelope: dict[str, Any], field: str) -> int | None:
    value = envelope.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field!r} must be an integer, got {value!r}")
    return value


def _optional_str(envelope: dict[str, Any], field: str) -> str | None:
    value = envelope.get(field)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{field!r} must be a string or null, got {type(value).__name__}")
    return value


def _headers(raw: Any) -> tuple[tuple[str, str | None], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) % 2:
        raise ValueError("'headers' must be a flat [name, value, ...] list of even length")
    names, values = raw[0::2], raw[1::2]
    if not all(isinstance(n, str) for n in names):
        raise ValueError("header names must be strings")
    if not all(v is None or isinstance(v, str) for v in values):
        raise ValueError("header values must be strings or null")
    return tuple(zip(names, values, strict=True))


def from_kcat_dict(envelope: Any) -> KafkaRecord:
    """Parses one envelope; raises ValueError describing the first problem found."""
    if not isinstance(envelope, dict):
        raise ValueError(f"expected a JSON object, got {type(envelope).__name__}")
    topic = envelope.get("topic")
    if not isinstance(topic, str) or not topic:
        raise ValueError("missing or empty 'topic'")
    return KafkaRecord(
        topic=topic,
        key=_optional_str(envelope, "key"),
        payload=_optional_str(envelope, "payload"),
        partition=_optional_int(envelope, "partition"),
        offset=_optional_int(envelope, "offset"),
        timestamp_ms=_optional_int(envelope, "ts"),
        headers=_headers(envelope.get("headers")),
    )


def read_kcat_jsonl(path: str | Path) -> list[KafkaRecord]:
    """All records of a kcat JSONL file; blank lines are skipped."""
    records = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                records.append(from_kcat_dict(json.loads(line)))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError too
                raise KcatFormatError(f"{path}:{number}: {exc}") from None
    return records


def write_kcat_jsonl(path: str | Path, records: Iterable[KafkaRecord]) -> int:
    """Writes the records one envelope per line; returns how many were written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(to_kcat_dict(record)) + "\n")
            count += 1
    return count


def kcat_dump_files(path: str | Path) -> list[Path]:
    """The kcat dumps a `file:` source names now: the file itself, every file under a directory,
    or what a glob matches (and the files under directories it matches).

    Below a directory, names starting with `.` or `_` are skipped, as Spark's file source skips
    them (editor swap files, `_SUCCESS` markers).
    """
    text = str(path)
    roots = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
    files = []
    for root in map(Path, roots):
        if root.is_dir():
            files += sorted(p for p in root.rglob("*") if p.is_file() and not any(
                part.startswith((".", "_")) for part in p.relative_to(root).parts))
        elif root.is_file():
            files.append(root)
    return files
