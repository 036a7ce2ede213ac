"""A new table's first commit, as Delta wrote it for the same definition in this process.

Delta writes version 0 of a new table from its definition and the session's Delta settings
alone: the same commit for the same inputs but for the table's id, its creation time, the
commit's time and its transaction id. A new warehouse creates about 20 tables, and a long-lived
session (the suite's, the resident engine's, a continuous run's) creates the same definitions
again and again: each `CREATE TABLE` costs the JVM about 0.08 s (the statement's analysis,
Delta's table features, the commit and its checksum), an eighth of a new warehouse's update.

So a definition's first creation goes through Delta (`table_definition.create`) and `remember`
keeps the commit and the checksum it wrote; `replay` gives the next table of the same
definition, under the same Delta settings, that commit again with a new id and the time of
now, written as Delta writes it, into a directory that holds nothing else:
`_delta_log/_staged_commits/` first, the commit through a hidden temporary file that becomes
`00000000000000000000.json` only if no commit is there (a table already there is left alone,
as `IF NOT EXISTS` leaves it), then the checksum. The JVM is asked only for the session's
settings.

Only a commit known to hold nothing else of its own is replayed: `commitInfo`, `metaData`,
`protocol` and `domainMetadata` actions, each of the four values named once in the commit and in
the checksum, no in-commit timestamp; on a local disk. Anything else goes through Delta every
time.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactly_once.local.storage.delta_log import DELTA_LOG_DIR
from exactly_once.local.storage.files import write_atomic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

COMMIT = f"{0:020d}.json"
CHECKSUM = f"{0:020d}.crc"
STAGED = "_staged_commits"
_ACTIONS = {"commitInfo", "metaData", "protocol", "domainMetadata"}
# The commit information of a CREATE that holds nothing but the statement's: Delta adds
# `inCommitTimestamp` (a time of its own) when in-commit timestamps are on.
_COMMIT_INFO = {"timestamp", "operation", "operationParameters", "isolationLevel",
                "isBlindAppend", "operationMetrics", "engineInfo", "txnId", "userMetadata"}
# The session settings a CREATE's commit depends on: Delta's own (defaults of table properties
# and features, commit metadata) and the column names' case rule (what Delta accepts).
_SETTINGS = ("spark.databricks.delta.", "spark.sql.caseSensitive")
# ... but the version the session's last commit wrote, which Delta sets after every commit.
_NOT_SETTINGS = ("spark.databricks.delta.lastCommitVersionInSession ",)


@dataclass(frozen=True)
class _Template:
    commit: str
    checksum: str
    table_id: str
    created: int  # metaData.createdTime, ms
    committed: int  # commitInfo.timestamp, ms
    txn: str  # commitInfo.txnId, the checksum's too


_templates: dict[tuple[Any, ...], _Template] = {}
_lock = threading.Lock()


def key(spark: SparkSession, path: str, columns: StructType, comment: str | None,
        properties: Mapping[str, str], partition_cols: tuple[str, ...],
        cluster_by: tuple[str, ...]) -> tuple[Any, ...] | None:
    """What a new table's first commit at `path` is a function of; None off a local disk."""
    if "://" in path:
        return None
    # One call for the whole configuration (a Scala map as text), filtered here.
    everything: str = spark.conf._jconf.getAll().mkString("\n")  # type: ignore[attr-defined]
    settings = tuple(sorted(line for line in everything.split("\n")
                            if line.startswith(_SETTINGS)
                            and not line.startswith(_NOT_SETTINGS)))
    return (settings, columns.json(), comment, tuple(sorted(properties.items())),
            partition_cols, cluster_by)


def replay(template_key: tuple[Any, ...], path: str) -> bool:
    """Write the remembered first commit of `template_key` as a new table at `path`; False when
    none is remembered (the caller creates it through Delta)."""
    with _lock:
        template = _templates.get(template_key)
    if template is None:
        return False
    table = Path(path)
    if table.is_dir() and any(entry.name != DELTA_LOG_DIR for entry in table.iterdir()):
        return False  # files of something else there: Delta says what it makes of them
    log = table / DELTA_LOG_DIR
    (log / STAGED).mkdir(parents=True, exist_ok=True)
    commit = log / COMMIT
    now, table_id, txn = int(time.time() * 1000), str(uuid.uuid4()), str(uuid.uuid4())
    text = _substitute(template.commit, template, table_id, now, txn)
    if not _put_if_absent(commit, text):
        return True  # created meanwhile: left alone, as IF NOT EXISTS
    write_atomic(log / CHECKSUM, _substitute(template.checksum, template, table_id, now, txn))
    return True


def remember(template_key: tuple[Any, ...], path: str) -> None:
    """Keep the first commit Delta just wrote at `path`, if it is one `replay` may repeat."""
    log = Path(path) / DELTA_LOG_DIR
    try:
        commit = (log / COMMIT).read_text("utf-8")
        checksum = (log / CHECKSUM).read_text("utf-8")
    except FileNotFoundError:
        return
    template = _template(commit, checksum)
    if template is not None:
        with _lock:
            _templates.setdefault(template_key, template)


def forget() -> None:
    """Drop every remembered commit (a test's clean slate)."""
    with _lock:
        _templates.clear()


def _template(commit: str, checksum: str) -> _Template | None:
    actions = [json.loads(line) for line in commit.split("\n") if line.strip()]
    kinds = [next(iter(action)) for action in actions]
    if any(len(action) != 1 for action in actions) or not set(kinds) <= _ACTIONS \
            or not {"commitInfo", "metaData", "protocol"} <= set(kinds) \
            or kinds.count("commitInfo") != 1 or kinds.count("metaData") != 1:
        return None
    info = actions[kinds.index("commitInfo")]["commitInfo"]
    metadata = actions[kinds.index("metaData")]["metaData"]
    if not set(info) <= _COMMIT_INFO or "timestamp" not in info or "txnId" not in info:
        return None
    if "inCommitTimestampOpt" in json.loads(checksum):
        return None
    template = _Template(commit, checksum, metadata["id"], int(metadata["createdTime"]),
                         int(info["timestamp"]), info["txnId"])
    # Each value named exactly once in each file (twice, then, nowhere): nothing else changes.
    for text, expected in ((commit, (1, 1, 1, 1)), (checksum, (1, 1, 0, 1))):
        if tuple(len(p.findall(text)) for p in _patterns(template)) != expected:
            return None
    return template


def _patterns(template: _Template) -> tuple[re.Pattern[str], ...]:
    return (re.compile(re.escape(f'"id":"{template.table_id}"')),
            re.compile(re.escape(f'"createdTime":{template.created}') + r"(?!\d)"),
            re.compile(re.escape(f'"timestamp":{template.committed}') + r"(?!\d)"),
            re.compile(re.escape(f'"txnId":"{template.txn}"')))


def _substitute(text: str, template: _Template, table_id: str, now: int, txn: str) -> str:
    ids, created, committed, txns = _patterns(template)
    text = ids.sub(f'"id":"{table_id}"', text)
    text = created.sub(f'"createdTime":{now}', text)
    text = committed.sub(f'"timestamp":{now}', text)
    return txns.sub(f'"txnId":"{txn}"', text)


def _put_if_absent(target: Path, text: str) -> bool:
    """Write `target` whole unless it exists (a hidden temporary file, hard-linked into place:
    the link fails when the name is taken); whether this call wrote it."""
    partial = target.with_name(f".{target.name}.{uuid.uuid4()}.tmp")
    partial.write_text(text, "utf-8")
    try:
        os.link(partial, target)
    except FileExistsError:
        return False
    finally:
        partial.unlink()
    return True
