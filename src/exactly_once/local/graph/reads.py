"""Resolves reads of pipeline datasets inside flow functions, as Databricks does.

On Databricks, `spark.readStream.table("silver_orders")` inside a pipeline file means "the dataset
this pipeline defines", and the pipeline updates it first. Classic PySpark knows nothing of the
graph, so during an update these readers ask a resolver first and fall back to the catalog.

`LIVE.silver_orders` names the same dataset: the legacy LIVE virtual schema, which Databricks'
default publishing mode ignores (https://docs.databricks.com/aws/en/dlt/live-schema); a name
under LIVE that the pipeline does not define goes to the catalog as it was written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader

# (name, streaming) -> the dataset's DataFrame, or None when the pipeline does not define it
Resolver = Callable[[str, bool], DataFrame | None]
LIVE = "live"


def dataset_name(name: str) -> str:
    """`name` without the legacy `LIVE.` prefix (any case)."""
    schema, dot, rest = name.partition(".")
    return rest if dot and rest and schema.lower() == LIVE else name


@contextmanager
def resolved_reads(resolve: Resolver) -> Iterator[None]:
    """While inside, `table(name)` of the stream reader, the batch reader and the session asks
    `resolve` first. The pipeline files call these methods on pyspark's own objects, so the
    methods are replaced on the classes for the duration."""
    originals = (DataStreamReader.table, DataFrameReader.table, SparkSession.table)

    def stream_table(self: DataStreamReader, tableName: str) -> DataFrame:
        df = resolve(dataset_name(tableName), True)
        return df if df is not None else originals[0](self, tableName)

    def batch_table(self: DataFrameReader, tableName: str) -> DataFrame:
        df = resolve(dataset_name(tableName), False)
        return df if df is not None else originals[1](self, tableName)

    def session_table(self: SparkSession, tableName: str) -> DataFrame:
        df = resolve(dataset_name(tableName), False)
        return df if df is not None else originals[2](self, tableName)

    # Replacing these methods is the purpose here; mypy's method-assign check is for doing it
    # by accident. The replacements have pyspark's signatures.
    DataStreamReader.table = stream_table  # type: ignore[method-assign]
    DataFrameReader.table = batch_table  # type: ignore[method-assign]
    SparkSession.table = session_table  # type: ignore[method-assign]
    try:
        yield
    finally:
        DataStreamReader.table = originals[0]  # type: ignore[method-assign]
        DataFrameReader.table = originals[1]  # type: ignore[method-assign]
        SparkSession.table = originals[2]  # type: ignore[method-assign]
