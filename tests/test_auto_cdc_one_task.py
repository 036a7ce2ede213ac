"""A small AUTO CDC batch planned as one task (auto_cdc/one_task.py): fewer Spark jobs, the same
tables as Spark's own plan gives."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql import functions as F
from spark_probes import JobsByStep, last_execution_id, sql_plans_since

from exactly_once.local.auto_cdc import changes, one_task, scd1, scd2
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.storage.warehouse import AutoCdcTables

SCHEMA = "id STRING, seq BIGINT, kind STRING, status STRING, note STRING"

BATCHES = [
    [("a", 1, "upsert", "new", "x"), ("a", 2, "upsert", "paid", None),
     ("b", 1, "upsert", "new", "y"), ("c", 3, "upsert", "new", "z"),
     ("c", 1, "upsert", "old", "w"),  # older than c's 3 in the same batch
     ("d", 5, "upsert", "new", "1"), ("e", 1, "delete", None, None)],
    [("a", 3, "upsert", "shipped", "s"), ("a", 1, "upsert", "new", "x"),  # a redelivery
     ("b", 2, "delete", None, None), ("b", 3, "upsert", "again", None),  # a re-insert
     ("c", 2, "upsert", "late", "l"),  # late: c is at 3
     ("d", 5, "upsert", "new", "2"),  # a tie at 5 with the first batch's, by content
     ("f", 1, "upsert", "new", None), (None, 1, "upsert", "no key", None)],
]


def spec_of(scd_type: int) -> AutoCdcSpec:
    return AutoCdcSpec(name=f"scd{scd_type}", target="t", source="s", keys=("id",),
                       sequence_by=F.col("seq"), apply_as_deletes=F.expr("kind = 'delete'"),
                       except_column_list=("kind",), stored_as_scd_type=scd_type,
                       ignore_null_updates=scd_type == 1)


class Flow:
    """An AUTO CDC flow's tables under `folder`, each batch read from its Parquet files as a
    pipeline's micro-batch is from those of its Delta source's new version: a plan whose size
    Spark knows."""

    def __init__(self, spark, folder, scd_type: int):
        self.spark, self.folder, self.spec = spark, folder, spec_of(scd_type)
        self.scd = scd2 if scd_type == 2 else scd1
        self.tables = AutoCdcTables(*(str(folder / n) for n in ("target", "state", "rejected")))
        sample = spark.createDataFrame([], SCHEMA)
        spark.createDataFrame([], self.scd.target_schema(self.spec, sample)).write \
            .format("delta").save(self.tables.target)
        self.scd.ensure_state_table(spark, self.spec, sample, self.tables.state)
        self.batch_ids = itertools.count()

    def apply(self, rows, steps: JobsByStep | None = None):
        batch_id = next(self.batch_ids)
        path = str(self.folder / f"batch-{batch_id}")
        self.spark.createDataFrame(rows, SCHEMA).write.parquet(path)
        batch = self.spark.read.parquet(path)
        write = BatchWrite("test-query", batch_id, **({"step": steps.step} if steps else {}))
        return self.scd.apply_batch(self.spark, batch, self.spec, self.tables, write)

    def table(self, path: str) -> list[tuple]:
        df = self.spark.read.format("delta").load(path).drop("__deleted_at")
        return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_small_batch_is_one_task_s_plan_with_the_tables_spark_s_plan_gives(
        spark, tmp_path, monkeypatch, scd_type):
    """The same batches (late and stale events, a redelivery, ties, deletes, a re-insert, a
    NULL update, a NULL key) into two flows, one planned in one task, the other as Spark plans
    it: the same targets, state tables and batch counts. In one task each batch's changes
    (aggregations, the join with the state) are one Spark job, four in Spark's plan, and
    SCD2's versions, replayed with windows, are computed as the replace writes them, with no
    exchange, its keys observed as the changes are computed (no job to collect them)."""
    results = {}
    for plan, limit in (("one task", one_task.ONE_TASK_MAX_BYTES), ("spark", -1)):
        monkeypatch.setattr(one_task, "ONE_TASK_MAX_BYTES", limit)
        flow = Flow(spark, tmp_path / plan.replace(" ", "-"), scd_type)
        steps = JobsByStep(spark)
        first = last_execution_id(spark)
        stats = [flow.apply(rows, steps) for rows in BATCHES]
        replaces = [p for p in sql_plans_since(spark, first) if "__START_AT" in p
                    and "Overwrite" in p]
        results[plan] = (stats, flow.table(flow.tables.target), flow.table(flow.tables.state))
        if plan == "one task":
            assert steps.jobs["changes"] == len(BATCHES), steps.jobs
            assert bool(replaces) == (scd_type == 2), replaces  # the second batch's
            assert not any("Exchange" in p for p in replaces), replaces
            # the replace's own: Delta's (the target's state rebuilt, the files that hold the
            # keys found, the write); the keys were observed as the changes were computed
            assert steps.jobs.get("target replace", 0) <= 8, steps.jobs
        else:
            assert steps.jobs["changes"] > len(BATCHES), steps.jobs
    assert results["one task"] == results["spark"]
    stats, target, _ = results["one task"]
    assert stats[1].stale >= 1 and stats[1].rejected == 1 and len(target) >= 5


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_state_read_for_the_batch_s_keys_keeps_spark_s_plan(spark, tmp_path, monkeypatch,
                                                               scd_type):
    """Past `changes.KEYED_STATE_READ_MIN_ROWS` (0 here) a batch reads only its keys' state
    rows, with a broadcast semi-join: Spark's plan, whatever the sizes, as one task's would
    need a shuffle for it (the optimizer pushes a semi-join below the one partition)."""
    monkeypatch.setattr(changes, "KEYED_STATE_READ_MIN_ROWS", 0)
    flow = Flow(spark, tmp_path, scd_type)
    flow.apply(BATCHES[0])
    steps = JobsByStep(spark)
    flow.apply(BATCHES[1], steps)
    assert steps.jobs["changes"] > 1, steps.jobs
    assert ("a", 3) in {(r[0], r[1]) for r in flow.table(flow.tables.target)}
