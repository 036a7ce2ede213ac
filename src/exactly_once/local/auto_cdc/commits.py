"""The writes of an AUTO CDC batch that a replayed batch must not repeat.

Structured Streaming replays a micro-batch after a crash. Each write here carries a marker
(`delta_log.Marker`: the streaming query's id + flow + table, and the batch id), as Spark's own
Delta sink marks its commits with its query id; a replayed batch skips a write whose marker is
already in the table's log (`idempotent.py`). A new checkpoint is a new query id, so its batch
ids (from 0 again) are never mistaken for ones already written.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from delta.tables import DeltaMergeBuilder
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.local.auto_cdc.changes import REJECT_REASON
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.engine.sql_columns import struct_sql
from exactly_once.local.storage import delta_log, idempotent
from exactly_once.local.storage.delta_log import Marker


@dataclass(frozen=True)
class BatchWrite:
    """Who writes this micro-batch: the streaming query's id, the batch, and whether Structured
    Streaming is running it again after a crash."""

    query_id: str
    batch_id: int
    replayed: bool = False
    # Records a named step of the batch (the update's timeline); by default nothing.
    step: Callable[[str], AbstractContextManager[object]] = field(
        default=lambda name: nullcontext(), compare=False)

    def marker(self, spec: AutoCdcSpec, role: str) -> Marker:
        return Marker(_writer(f"{self.query_id}:{spec.name}", role), self.batch_id)


def _writer(query_and_flow: str, role: str) -> str:
    """A marker's writer: the streaming query and flow, then the role of the table written."""
    return f"{query_and_flow}:{role}"


def merge_once(spark: SparkSession, merge: DeltaMergeBuilder, path: str, spec: AutoCdcSpec,
               role: str, write: BatchWrite) -> bool:
    """The MERGE into `spec`'s `role` table (target or state), once per batch; whether this
    call committed it."""
    return idempotent.merge(spark, merge, path, write.marker(spec, role), write.replayed)


def append_once(rows: DataFrame, path: str, spec: AutoCdcSpec, role: str,
                write: BatchWrite) -> bool:
    """Append `rows` to `spec`'s `role` table (the state log; an empty target), once per
    batch."""
    return idempotent.append(rows, path, write.marker(spec, role), write.replayed)


def state_caught_up(target_path: str, state_path: str) -> bool:
    """Whether the state table recorded the target's last write: the target's newest commit is
    a marked target write whose writer's state append for that batch (or a later one) is in the
    state log. Not after a crash between the two commits until the batch is replayed, nor
    after an unmarked commit into the target (its creation, a schema change): then only the
    target itself can say which keys it holds."""
    marker = Marker.of_commit(
        delta_log.commit_info(target_path, delta_log.latest_version(target_path)))
    if marker is None:
        return False
    query_and_flow, _, role = marker.writer.rpartition(":")
    if role != "target":
        return False
    state_batch = delta_log.committed_batch(state_path, _writer(query_and_flow, "state"))
    return state_batch is not None and state_batch >= marker.batch


def replace_once(rows: DataFrame, path: str, predicate: str, spec: AutoCdcSpec, role: str,
                 write: BatchWrite) -> bool:
    """Replace the rows of `spec`'s `role` table that match `predicate` with `rows`, in one
    commit, once per batch."""
    return idempotent.replace(rows, path, predicate, write.marker(spec, role), write.replayed)


def record_rejected(events: DataFrame, source_columns: list[str], spec: AutoCdcSpec,
                    rejected_path: str | None, write: BatchWrite) -> None:
    """Append the tagged batch's rejected events to the rejected-rows table (once per batch).

    Columns: flow, batch_id, reason, record (the source row as JSON), rejected_at.
    """
    if not rejected_path:
        return
    rejected = events.where(F.col(REJECT_REASON) != "")
    # Every field, NULLs included: a row rejected for a NULL key shows the key as null.
    record = F.expr(f"to_json({struct_sql(source_columns)}, map('ignoreNullFields', 'false'))")
    rows = rejected.select(F.lit(spec.name).alias("flow"),
                           F.lit(write.batch_id).cast("bigint").alias("batch_id"),
                           F.col(REJECT_REASON).alias("reason"), record.alias("record"),
                           F.current_timestamp().alias("rejected_at"))
    idempotent.append(rows, rejected_path, write.marker(spec, "rejected"), write.replayed)
