"""A small AUTO CDC batch planned as one task: no shuffle, no broadcast.

An AUTO CDC batch aggregates per key, joins the batch with the flow's state and (SCD2) replays
each key's versions with windows. Spark plans each of those with an exchange of the rows, and
under adaptive execution every exchange is a Spark job of its own (a stage, its tasks, the
plan optimized again), as is every broadcast of a small join side: for the hundred rows of a
small update, four jobs to compute an SCD1 batch's changes, where the rows take milliseconds.

One partition satisfies every distribution an aggregation, a window or a join asks of its
input. So when the micro-batch's files and the flow's state table are together smaller than
ONE_TASK_MAX_BYTES, both are read into one partition (`coalesce(1)`: narrow, no shuffle of its
own) and the joins between them are hinted `shuffle_hash`, so that no side is broadcast: the
batch's plan has no exchange. A larger batch keeps Spark's plan, its partitions and every core,
and so does one whose state is read for its keys only (`changes.batch_plan`). Only the physical
plan differs: the rows are the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from exactly_once.local.storage import delta_log

# Parquet bytes of batch and state that one task reads and joins in a few tens of
# milliseconds (about 15,000 of silver's rows). Not more: a 200,000-event update's silver
# batches (5.5 and 7.5 MB) took 1.06x the wall in one task, whose scan computes every row's
# tie-break on one core where Spark's plan reads them in two partitions.
ONE_TASK_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class BatchPlan:
    """How an AUTO CDC batch's reads and joins are planned: in one task, or as Spark plans
    them."""

    one_task: bool

    def read(self, rows: DataFrame) -> DataFrame:
        """`rows` (the batch, or a read of the flow's state) as the batch's plan reads them."""
        return rows.coalesce(1) if self.one_task else rows

    def join_side(self, rows: DataFrame) -> DataFrame:
        """`rows` as the side of a join within the batch: joined where they are, not
        broadcast, in one task."""
        return rows.hint("shuffle_hash") if self.one_task else rows


SPARK_PLAN = BatchPlan(one_task=False)


def plan_for(batch: DataFrame, state_path: str) -> BatchPlan:
    """One task when the batch's files (its plan's size, which Spark knows from a Delta
    micro-batch's files; a Kafka batch has no estimate) and the state table's live files
    (its log's `add` sizes) are together under ONE_TASK_MAX_BYTES."""
    files = delta_log.live_files(state_path)
    if files is None:
        return SPARK_PLAN
    state_bytes = sum(int(add.get("size") or 0) for add in files.adds.values())
    batch_bytes = int(batch._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    return BatchPlan(one_task=state_bytes + batch_bytes <= ONE_TASK_MAX_BYTES)
