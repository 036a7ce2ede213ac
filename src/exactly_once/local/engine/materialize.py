"""A DataFrame's rows computed once and cut from their plan, for the writes of an AUTO CDC batch.

An AUTO CDC batch computes its changes once, then MERGEs them into the target and appends them
to its state: the writes must read the rows, not the plan they came from (the plan reads the
state table, so Delta would count the append as a read of the table it writes, and the MERGE
would evaluate the plan again for each of its passes).

In `local[N]` that is a local checkpoint: the rows stay in the block manager of the one JVM,
which is the driver too. On a cluster a local checkpoint's blocks live in the executors and
die with them, with no plan left to compute them again: a worker lost between the checkpoint
and the MERGE failed the update (`CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND`, tests/test_cluster.py).
There the rows are collected into the driver instead and written from there (a local relation),
which no executor's loss can take away.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from exactly_once.local.engine.deployment import Deployment


def computed_once(df: DataFrame) -> DataFrame:
    """`df`'s rows, computed now (its observations reported), with no plan behind them."""
    spark = df.sparkSession
    if not Deployment(spark.sparkContext.master or Deployment.master).is_cluster:
        return df.localCheckpoint(eager=True)
    return in_driver(df)


def in_driver(df: DataFrame) -> DataFrame:
    """`df`'s rows collected into the driver's JVM, as a local relation. Never through Python:
    a DataFrame of a Python list runs PySpark's Python worker, a process of its own."""
    rows = df._jdf.collectAsList()
    return DataFrame(df.sparkSession._jsparkSession.createDataFrame(rows, df._jdf.schema()),
                     df.sparkSession)
