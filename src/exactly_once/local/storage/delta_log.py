"""A Delta table's transaction log read directly, in Python: no Spark job, no snapshot.

Spark's Delta reader rebuilds a table's state (a Spark job over the log) for many questions the
runtime asks after every write: which version the table is at, how many rows a commit wrote,
whether a micro-batch already committed. The answers are in the commit files themselves
(`_delta_log/<version>.json`, one JSON action per line), read through files.py: from the local
disk, or from the object store for a warehouse on one.

This module is the one definition of "a Delta table exists at this path": it has a committed
version. A `_delta_log` directory alone is not one: a process killed while creating a table
can leave the directory (and `_staged_commits/`) without any commit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from exactly_once.local.storage.files import StoragePath, location

DELTA_LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")
# A commit's userMetadata that marks which micro-batch of which writer it holds (see `Marker`).
MARKER_KEY = "exactly_once_batch"


def log_dir(path: StoragePath | str) -> StoragePath:
    return location(path) / DELTA_LOG_DIR


def versions(path: StoragePath | str) -> list[int]:
    """The table's committed versions that have a commit file, ascending."""
    try:
        names = [entry.name for entry in log_dir(path).iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(m.group(1)) for m in map(_COMMIT.match, names) if m)


def latest_version(path: StoragePath | str) -> int:
    """The latest committed version; -1 when the table has none (it does not exist)."""
    found = versions(path)
    if found:
        return found[-1]
    # Log cleanup may leave only a checkpoint of an old table (never the case locally, where
    # the commit files of the last 30 days stay); a checkpoint is a committed version too.
    try:
        names = [entry.name for entry in log_dir(path).iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return -1
    return max((int(m.group(1)) for m in map(_CHECKPOINT.match, names) if m), default=-1)


def is_delta_table(path: StoragePath | str) -> bool:
    """Whether a Delta table lives at `path`: its log has a committed version."""
    return latest_version(path) >= 0


def is_half_created(path: StoragePath | str) -> bool:
    """Whether `path` is what a process killed while Delta created a table there leaves: a log
    directory holding nothing but an empty `_staged_commits/` and temporary files (Delta writes
    a commit to a hidden temporary file, then renames it). Such a directory holds nothing
    committed; anything else in the log (a commit, a checkpoint, `_last_checkpoint`, a staged
    commit) makes it not one, whatever `is_delta_table` says."""
    try:
        entries: list[StoragePath] = list(log_dir(path).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return False
    for entry in entries:
        if entry.name == "_staged_commits" and entry.is_dir():
            if any(entry.iterdir()):
                return False
        elif not entry.name.startswith("."):
            return False
    return not is_delta_table(path)


def actions(path: StoragePath | str, version: int) -> Iterator[dict[str, Any]]:
    """The actions of one commit, in file order."""
    text = (log_dir(path) / f"{version:020d}.json").read_text(encoding="utf-8")
    # One action per "\n"-ended line; not splitlines(), which also splits at the U+2028 or
    # U+0085 a string in the file statistics may hold.
    for line in text.split("\n"):
        if line.strip():
            yield json.loads(line)


def commit_info(path: StoragePath | str, version: int) -> dict[str, Any]:
    """The commit's commitInfo action (Delta writes it first); {} when there is none."""
    for action in actions(path, version):
        if "commitInfo" in action:
            info: dict[str, Any] = action["commitInfo"]
            return info
    return {}


def rows_written(path: StoragePath | str, after_version: int) -> int:
    """Rows the commits after `after_version` wrote, from their `operationMetrics`."""
    total = 0
    for version in versions(path):
        if version > after_version:
            metrics = commit_info(path, version).get("operationMetrics", {})
            total += int(metrics.get("numOutputRows", 0))
    return total


# How each operation changes the row count, from its operationMetrics. An operation not listed
# (or a commit without metrics) makes the count unknown: `row_count` returns None.
_UNCHANGED = {"CREATE TABLE", "ADD COLUMNS", "CHANGE COLUMN", "SET TBLPROPERTIES",
              "UNSET TBLPROPERTIES", "OPTIMIZE", "UPDATE", "ADD CONSTRAINT", "DROP CONSTRAINT",
              "UPGRADE PROTOCOL", "VACUUM START", "VACUUM END", "CREATE OR REPLACE TABLE",
              "CLUSTER BY"}
_row_counts: dict[str, tuple[str | None, int, int]] = {}  # path -> (table id, version, rows)


def _rows_after(info: dict[str, Any], rows: int) -> int | None:
    operation = info.get("operation", "")
    metrics = info.get("operationMetrics") or {}

    def metric(name: str) -> int:
        return int(metrics.get(name, 0))

    if operation in ("WRITE", "STREAMING UPDATE", "CREATE TABLE AS SELECT",
                     "REPLACE TABLE AS SELECT", "CREATE OR REPLACE TABLE AS SELECT"):
        if "numOutputRows" not in metrics:
            return None
        mode = str((info.get("operationParameters") or {}).get("mode", "Append"))
        appended = mode.strip('"').lower() == "append" and "AS SELECT" not in operation
        return rows + metric("numOutputRows") if appended else metric("numOutputRows")
    if operation == "MERGE":
        return rows + metric("numTargetRowsInserted") - metric("numTargetRowsDeleted")
    if operation == "DELETE":
        return rows - metric("numDeletedRows") if "numDeletedRows" in metrics else None
    if operation in _UNCHANGED:
        return rows
    return None


def _resume(path: StoragePath | str, committed: list[int],
            remembered: tuple[str | None, int] | None) -> tuple[str | None, int] | None:
    """Where a replay of the table's commits picks up, given the (table id, last version
    applied) remembered for its path: (the table's id, the version to go on after; -1 for a
    replay from the start, as for a table recreated at the same path). None when the commit
    files it would need were already cleaned up: then the log cannot tell."""
    ident = table_id(path)
    known_id, version = remembered or (ident, -1)
    if known_id != ident or version > committed[-1]:  # recreated at the same path
        version = -1
    if committed[0] > version + 1:  # commit files before these were cleaned up
        return None
    return ident, version


def row_count(path: StoragePath | str) -> int | None:
    """The table's rows, summed from its commits' operationMetrics (appends, MERGE, DELETE,
    overwrites); None when a commit does not say (an operation not listed above, or commit
    files already cleaned up): then only a scan can tell. Remembered per path, so the next
    call reads only the commits since."""
    key = str(location(path).resolve())
    committed = versions(path)
    if not committed:
        return 0
    known = _row_counts.get(key)
    resumed = _resume(path, committed, known[:2] if known else None)
    if resumed is None:
        return None
    ident, version = resumed
    rows = known[2] if known and version == known[1] else 0
    for v in committed:
        if v > version:
            after = _rows_after(commit_info(path, v), rows)
            if after is None:
                return None
            version, rows = v, after
    _row_counts[key] = (ident, version, rows)
    return rows


@dataclass(frozen=True)
class LiveFiles:
    """A table's latest version as its commit files say: each live file's `add` action (keyed
    by `_file_key`), and the table's configuration (its metaData's)."""

    version: int
    adds: dict[tuple[str, ...], dict[str, Any]]
    configuration: dict[str, str]
    partitioned: bool


_live_files: dict[str, tuple[str | None, LiveFiles]] = {}  # path -> (table id, files)
_NO_FILES = LiveFiles(-1, {}, {}, False)


def _file_key(action: dict[str, Any]) -> tuple[str, ...]:
    """A file's identity in log replay: its path and its deletion vector's, as Delta's own
    replay keys it (a DELETE that adds a vector to a file adds the file with the vector and
    removes it without, in either order within its commit)."""
    vector = action.get("deletionVector") or {}
    return (action["path"], *(str(vector.get(part, ""))
                              for part in ("storageType", "pathOrInlineDv", "offset")))


def live_files(path: StoragePath | str) -> LiveFiles | None:
    """The files of the table's latest version, replayed from its commit files (each commit's
    `add` and `remove` actions, and its metaData); None when they cannot tell (no commit file,
    or those before the versions remembered already cleaned up). Remembered per path, as
    `row_count`: the next call reads only the commits since."""
    key = str(location(path).resolve())
    committed = versions(path)
    if not committed:  # no table, or a log left with a checkpoint alone
        return None
    remembered = _live_files.get(key)
    resumed = _resume(path, committed, (remembered[0], remembered[1].version)
                      if remembered else None)
    if resumed is None:
        return None
    ident, version = resumed
    known = remembered[1] if remembered and version == remembered[1].version else _NO_FILES
    adds, configuration, partitioned = dict(known.adds), known.configuration, known.partitioned
    for v in committed:
        if v > version:
            for action in actions(path, v):
                if "remove" in action:
                    adds.pop(_file_key(action["remove"]), None)
                elif "add" in action:
                    adds[_file_key(action["add"])] = action["add"]
                elif "metaData" in action:
                    configuration = dict(action["metaData"].get("configuration") or {})
                    partitioned = bool(action["metaData"].get("partitionColumns"))
            version = v
    files = LiveFiles(version, adds, configuration, partitioned)
    _live_files[key] = (ident, files)
    return files


def live_file_stats(path: StoragePath | str) -> list[dict[str, Any] | None] | None:
    """The statistics Delta wrote for each file of the table's latest version (`add.stats`,
    parsed: numRecords, minValues, maxValues, nullCount; None for a file written without);
    None when the commit files cannot tell (`live_files`)."""
    files = live_files(path)
    if files is None:
        return None
    return [json.loads(add["stats"]) if add.get("stats") else None
            for add in files.adds.values()]


# Table settings under which a file's Parquet columns are not the table's columns as they are.
_NOT_PLAIN_PARQUET = {"delta.columnMapping.mode": {"id", "name"},
                      "delta.enableTypeWidening": {"true"}}


def plain_parquet_files(path: StoragePath | str) -> list[str] | None:
    """The Parquet files that hold exactly the table's latest version, read as plain Parquet
    with the table's schema (a column a file lacks reads as NULL, as Delta reads it): for a
    table without partitions, deletion vectors, column mapping or type widening, whose files
    the log names by relative paths. None for any other table, or when the commit files cannot
    tell (`live_files`): then only Delta's reader can read it."""
    files = live_files(path)
    if files is None or files.partitioned or any(
            files.configuration.get(key, "").lower() in values
            for key, values in _NOT_PLAIN_PARQUET.items()):
        return None
    root = str(path).rstrip("/")
    found = []
    for add in files.adds.values():
        name = str(add["path"])
        if add.get("deletionVector") or ":" in name or name.startswith("/"):
            return None  # rows deleted by a vector, or a file outside the table (a clone)
        found.append(f"{root}/{unquote(name)}")
    return found


def appends_since_creation(path: StoragePath | str, max_versions: int = 100) -> bool:
    """Whether every commit of the table, from its creation (version 0) on, only added rows:
    no file removed, no change of schema or protocol after version 0. Then its commits, read
    in order, hold exactly the rows of its latest snapshot. False as well when the log has
    more than `max_versions` commits (not worth reading here) or its first commits are gone."""
    committed = versions(path)
    if not committed or len(committed) > max_versions or committed != list(
            range(len(committed))):
        return False
    for version in committed:
        for action in actions(path, version):
            if "remove" in action or "cdc" in action or (
                    version > 0 and ("metaData" in action or "protocol" in action)):
                return False
    return True


def _latest_checksum(path: StoragePath | str, version: int) -> dict[str, Any] | None:
    """The checksum file of `version` (`<version>.crc`, which Delta writes with each commit and
    which holds the table's metadata, protocol and domain metadata), if it is there and whole."""
    try:
        crc = json.loads((log_dir(path) / f"{version:020d}.crc").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    metadata = crc.get("metadata") if isinstance(crc, dict) else None
    return crc if isinstance(metadata, dict) and "id" in metadata else None


def _latest_metadata(path: StoragePath | str) -> dict[str, Any] | None:
    """The metaData of the table's latest version: from that version's checksum file, else
    from the latest commit that carries metadata; None when neither is there."""
    found = versions(path)
    if not found:
        return None
    crc = _latest_checksum(path, found[-1])
    if crc is not None:
        return dict(crc["metadata"])
    for version in reversed(found):
        for action in actions(path, version):
            if "metaData" in action:
                return dict(action["metaData"])
    return None


@dataclass(frozen=True)
class Described:
    """What `DESCRIBE DETAIL` says of a table's definition, read from its log."""

    description: str | None
    properties: dict[str, str]
    partition_columns: list[str]
    clustering_columns: list[str] | None  # None: the log cannot tell
    schema_json: str


CLUSTERING_DOMAIN = "delta.clustering"


def described(path: StoragePath | str) -> Described | None:
    """The table's comment, properties, partitioning, clustering and schema at its latest
    version, from its checksum file (the metadata also from its commits); None when there is
    no table."""
    found = versions(path)
    if not found:
        return None
    crc = _latest_checksum(path, found[-1])
    metadata = dict(crc["metadata"]) if crc is not None else _latest_metadata(path)
    if metadata is None:
        return None
    domains = crc.get("domainMetadata") if crc is not None else None
    # Without the checksum file (a writer that wrote none) only a replay of the whole log
    # could tell: not worth it here, where the next commit's checksum will.
    clustering = _clustering(domains) if isinstance(domains, list) else None
    return Described(metadata.get("description"), dict(metadata.get("configuration") or {}),
                     list(metadata.get("partitionColumns") or []), clustering,
                     str(metadata.get("schemaString", "")))


def _clustering(domains: list[dict[str, Any]]) -> list[str]:
    """The clustering columns the `delta.clustering` domain metadata names ([]: none)."""
    for domain in domains:
        if domain.get("domain") == CLUSTERING_DOMAIN and not domain.get("removed"):
            columns = json.loads(domain.get("configuration") or "{}").get("clusteringColumns")
            return [".".join(parts) for parts in columns or []]
    return []


def table_id(path: StoragePath | str) -> str | None:
    """The id in the table's metadata: a table dropped and created again at the same path gets
    a new one."""
    metadata = _latest_metadata(path)
    return None if metadata is None else str(metadata["id"])


def schema_string(path: StoragePath | str) -> str | None:
    """The table's latest schema as its metadata holds it (Spark's JSON of a StructType); None
    when the log cannot tell."""
    metadata = _latest_metadata(path)
    return None if metadata is None else metadata.get("schemaString")


def created_time(path: StoragePath | str) -> int | None:
    """When the table was created (its metadata's createdTime, epoch milliseconds): kept by
    every version, so it outlives the commits the log has cleaned up."""
    metadata = _latest_metadata(path)
    created = None if metadata is None else metadata.get("createdTime")
    return None if created is None else int(created)


def table_property(path: StoragePath | str, key: str) -> str | None:
    """A property of the table's latest version (its metadata's configuration)."""
    metadata = _latest_metadata(path)
    return None if metadata is None else (metadata.get("configuration") or {}).get(key)


def column_names(path: StoragePath | str) -> list[str] | None:
    """The top-level columns of the table's latest version (its metadata's schemaString);
    None when the log cannot tell."""
    metadata = _latest_metadata(path)
    if metadata is None:
        return None
    try:
        return [str(f["name"]) for f in json.loads(metadata["schemaString"])["fields"]]
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Marker:
    """Which micro-batch of which writer a commit holds, kept in the commit's userMetadata.

    `writer` names the streaming query (its checkpoint's id), the flow and the table's role, so
    a new checkpoint (a new id, batch ids from 0 again) is never mistaken for an old one. It
    does what Delta's own `txnAppId` / `txnVersion` do for Spark's Delta sink, but is checked
    by reading the last commits instead of rebuilding the table's state: Delta answers
    `txnVersion` only after a state reconstruction, two Spark jobs per write.
    """

    writer: str
    batch: int

    def user_metadata(self) -> str:
        return json.dumps({MARKER_KEY: {"writer": self.writer, "batch": self.batch}})

    @classmethod
    def of_commit(cls, info: dict[str, Any]) -> Marker | None:
        try:
            found = json.loads(info.get("userMetadata") or "")[MARKER_KEY]
            return cls(str(found["writer"]), int(found["batch"]))
        except (ValueError, TypeError, KeyError):
            return None


def committed_batch(path: StoragePath | str, writer: str) -> int | None:
    """The last micro-batch `writer` committed to the table, or None if it never did.

    A writer commits its batches in order, so the newest commit it made holds its last batch:
    the log is read backwards until one of its commits appears. Only a replayed batch asks
    (see `streams.py`), after a crash, and the writer's last commit is then usually among the
    newest.

    Commits made before markers existed (runtime 8b288b4 and older) count too: they carry
    Delta's own `txn` action, its appId the writer's name for an AUTO CDC write, the streaming
    query's id (the name's first part) for Delta's streaming sink. So a batch replayed after an
    upgrade is not applied a second time.
    """
    legacy = {writer, writer.split(":", 1)[0]}
    for version in reversed(versions(path)):
        for action in actions(path, version):
            if "commitInfo" in action:
                marker = Marker.of_commit(action["commitInfo"])
                if marker is not None and marker.writer == writer:
                    return marker.batch
            elif "txn" in action and action["txn"].get("appId") in legacy:
                return int(action["txn"]["version"])
    return None
