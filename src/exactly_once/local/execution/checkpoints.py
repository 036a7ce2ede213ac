"""What a streaming query's checkpoint says, read as Structured Streaming wrote it.

A micro-batch's source offsets are logged in `offsets/<batch>` before it runs and its commit in
`commits/<batch>` after; `metadata` holds the query's id. From these: whether a query started
here asks for its first batch, the batch a restart runs again, the query's id, and where each
source stood after the last committed batch (`committed_offsets`).
"""

from __future__ import annotations

import json
from typing import Any

from exactly_once.local.storage.files import StoragePath


def batch_ids(directory: StoragePath) -> list[int]:
    """The batch ids logged in `offsets/` or `commits/`, ascending."""
    try:
        return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    except FileNotFoundError:
        return []


def asks_for_first_batch(checkpoint: StoragePath) -> bool:
    """Whether a query started from `checkpoint` asks its sources for its first micro-batch
    (`getBatch` with no start): a new query, and one whose offsets log holds batch 0 alone,
    which Spark, restarting it, asks for that batch again (to run it again, or to set its
    sources up before the next). There the sources' options say where the batch began."""
    return batch_ids(checkpoint / "offsets") in ([], [0])


def replayed_batch(checkpoint: StoragePath) -> int | None:
    """The micro-batch a query restarted from `checkpoint` runs again: logged in `offsets/` but
    not in `commits/` (it may have written some of its output before the crash)."""
    return _uncommitted(batch_ids(checkpoint / "offsets"), batch_ids(checkpoint / "commits"))


def _uncommitted(offsets: list[int], commits: list[int]) -> int | None:
    """The last logged batch when it has no commit (the logs' batch ids, ascending)."""
    if offsets and (not commits or offsets[-1] > commits[-1]):
        return offsets[-1]
    return None


def query_id(checkpoint: StoragePath) -> str:
    """The id Structured Streaming gave the query of this checkpoint (its `metadata` file):
    the same across restarts, new when the checkpoint is new."""
    return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])


def committed_offsets(checkpoint: StoragePath) -> list[Any] | None:
    """Where each source of the query stood after its last batch, in the query's order of
    sources, each as the source wrote it (None for a source with no offset yet); None when the
    query has no batch, or its last one is logged but not committed (a restart runs it
    again)."""
    offsets = batch_ids(checkpoint / "offsets")
    if not offsets or _uncommitted(offsets, batch_ids(checkpoint / "commits")) is not None:
        return None
    try:
        lines = (checkpoint / "offsets" / str(offsets[-1])).read_text().splitlines()
    except FileNotFoundError:
        return None
    # "v1", the batch's metadata, then one line per source: its offset as JSON, or "-".
    if len(lines) < 3 or not lines[0].startswith("v"):
        return None
    try:
        return [None if line == "-" else json.loads(line) for line in lines[2:]]
    except ValueError:
        return None
