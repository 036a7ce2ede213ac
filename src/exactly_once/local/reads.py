"""Resolves reads of pipeline datasets inside flow functions, as Databricks does.

On Databricks, `spark.readStream.table("silver_orders")` inside a pipeline file means "the dataset
this pipeline defines", and the pipeline updates it first. Classic PySpark knows nothing of the
graph, so during an update these readers ask a resolver first and fall back to the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader

# (name, streaming) -> the dataset's DataFrame, or None when the pipeline does not define it
Resolver = Callable[[str, bool], DataFrame | None]


@contextmanager
def resolved_reads(resolve: Resolver) -> Iterator[None]:
    originals = (DataStreamReader.table, DataFrameReader.table, SparkSession.table)

    def stream_table(self: DataStreamReader, tableName: str) -> DataFrame:
        df = resolve(tableName, True)
        return df if df is not None else originals[0](self, tableName)

    def batch_table(self: DataFrameReader, tableName: str) -> DataFrame:
        df = resolve(tableName, False)
        return df if df is not None else originals[1](self, tableName)

    def session_table(self: SparkSession, tableName: str) -> DataFrame:
        df = resolve(tableName, False)
        return df if df is not None else originals[2](self, tableName)

    DataStreamReader.table, DataFrameReader.table, SparkSession.table = (
        stream_table, batch_table, session_table)
    try:
        yield
    finally:
        DataStreamReader.table, DataFrameReader.table, SparkSession.table = originals
