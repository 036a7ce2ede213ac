"""The versions of an AUTO CDC FROM SNAPSHOT flow: their types, their order, and the log of the
snapshots applied.

A version is an int, a str, a date or a datetime (the SCD2 target's `__START_AT` / `__END_AT`
take its Spark type: BIGINT, STRING, DATE, TIMESTAMP); one flow's versions have one type and
increase strictly.

The version log, `<warehouse>/_pipeline/auto_cdc/<target>/snapshot_versions.json`, lists each
snapshot applied, in order: `ordinal` (0, 1, ...), `version` and `version_type` (the version as
text and its type), its rows and the keys it inserted, updated and deleted, and `recorded_at`
(processing time). A snapshot is recorded after the target's MERGE, so the log never names a
snapshot the target lacks. The file is replaced whole (storage's `write_atomic`: renamed into
place on a local disk, one PUT on an object store): a crash leaves the old log or the new one,
never half of one. A plain file, not a Delta table: recording a snapshot costs no Spark job. A
full refresh deletes it with the target's state: the next update asks for the first snapshot
again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from pyspark.sql.types import DataType, DateType, LongType, StringType, TimestampType

from exactly_once.errors import SnapshotError
from exactly_once.local.storage.files import StoragePath, location, write_atomic

LOG_FILE = "snapshot_versions.json"
_SPARK_TYPES: dict[str, DataType] = {"int": LongType(), "str": StringType(), "date": DateType(),
                                     "timestamp": TimestampType()}


def version_type(version: Any) -> str | None:
    """The version's type name, or None when it is not one a version may have."""
    if isinstance(version, bool):
        return None
    if isinstance(version, datetime):  # before date: a datetime is a date
        return "timestamp"
    if isinstance(version, date):
        return "date"
    if isinstance(version, int):
        return "int"
    if isinstance(version, str):
        return "str"
    return None


def spark_type(version: Any) -> DataType:
    """The Spark type of `__START_AT` / `__END_AT` for versions like this one."""
    return _SPARK_TYPES[version_type(version) or "str"]


def shown(version: Any) -> str:
    """The version as messages and the event log show it."""
    if isinstance(version, str):
        return repr(version)
    return version.isoformat() if isinstance(version, date) else str(version)


def _text(version: Any) -> str:
    return version.isoformat() if isinstance(version, date) else str(version)


def _parse(text: str, type_name: str) -> Any:
    if type_name == "int":
        return int(text)
    if type_name == "date":
        return date.fromisoformat(text)
    if type_name == "timestamp":
        return datetime.fromisoformat(text)
    return text


def check_next(flow: str, source: str, version: Any, latest: Any) -> None:
    """`version` may follow `latest` (None: nothing applied yet): a version of a supported type,
    the same type as the last, and strictly greater. Else a SnapshotError naming both."""
    kind = version_type(version)
    where = f"AUTO CDC FROM SNAPSHOT flow `{flow}`: {source}"
    if kind is None:
        raise SnapshotError(f"{where} gave the version {version!r} ({type(version).__name__}); "
                            "a version is an int, a str, a date or a datetime")
    if latest is None:
        return
    if version_type(latest) != kind or (
            isinstance(version, datetime) and (version.tzinfo is None) != (latest.tzinfo is None)):
        raise SnapshotError(f"{where} gave the version {shown(version)} ({type(version).__name__})"
                            f" after the version {shown(latest)} ({type(latest).__name__}): one "
                            "flow's versions have one type")
    if not version > latest:
        relation = "equal to" if version == latest else "older than"
        raise SnapshotError(f"{where} gave the version {shown(version)}, {relation} the last "
                            f"applied version {shown(latest)}; versions must increase strictly")


@dataclass(frozen=True)
class AppliedSnapshot:
    """One snapshot applied to the target: which, and what it changed (by key)."""

    ordinal: int
    version: Any
    rows: int = 0  # rows in the snapshot
    inserted: int = 0  # keys new to the target
    updated: int = 0  # keys whose columns changed
    deleted: int = 0  # keys the snapshot no longer has

    @property
    def changed(self) -> int:
        return self.inserted + self.updated + self.deleted


def recorded(state: StoragePath | str) -> list[dict[str, Any]]:
    """The version log's entries (oldest first); [] before the first snapshot."""
    try:
        entries: list[dict[str, Any]] = json.loads((location(state) / LOG_FILE).read_text("utf-8"))
    except FileNotFoundError:
        return []
    return entries


def latest(state: StoragePath | str) -> tuple[int, Any] | None:
    """(ordinal, version) of the last snapshot recorded under `state`; None if none is."""
    entries = recorded(state)
    if not entries:
        return None
    last = entries[-1]
    return int(last["ordinal"]), _parse(last["version"], last["version_type"])


def record(state: StoragePath | str, applied: AppliedSnapshot) -> None:
    """Add `applied` to the log under `state`, replacing the file whole (`write_atomic`)."""
    entries = recorded(state)
    entries.append({"ordinal": applied.ordinal, "version": _text(applied.version),
                    "version_type": version_type(applied.version) or "str",
                    "rows": applied.rows, "rows_inserted": applied.inserted,
                    "rows_updated": applied.updated, "rows_deleted": applied.deleted,
                    "recorded_at": datetime.now(timezone.utc).isoformat()})
    write_atomic(location(state) / LOG_FILE, json.dumps(entries, indent=1))
