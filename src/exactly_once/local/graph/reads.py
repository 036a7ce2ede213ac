"""Resolves reads of pipeline datasets inside flow functions, as Databricks does.

On Databricks, `spark.readStream.table("silver_orders")` inside a pipeline file means "the dataset
this pipeline defines", and the pipeline updates it first. Classic PySpark knows nothing of the
graph, so during an update these readers ask a resolver first and fall back to the catalog.
The options set on the reader before `table(...)` (`maxFilesPerTrigger`, `skipChangeCommits`,
`versionAsOf`, ...) go to the resolver with the name: they are the read's, wherever it reads.

`LIVE.silver_orders` names the same dataset: the legacy LIVE virtual schema, which Databricks'
default publishing mode ignores (https://docs.databricks.com/aws/en/dlt/live-schema); a name
under LIVE that the pipeline does not define goes to the catalog as it was written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader

# (name, streaming, the reader's options) -> the dataset's DataFrame, or None when the pipeline
# does not define it
Resolver = Callable[[str, bool, Mapping[str, str]], DataFrame | None]
NO_OPTIONS: Mapping[str, str] = MappingProxyType({})  # shared: read-only
LIVE = "live"


def dataset_name(name: str) -> str:
    """`name` without the legacy `LIVE.` prefix (any case)."""
    schema, dot, rest = name.partition(".")
    return rest if dot and rest and schema.lower() == LIVE else name


def reader_options(reader: DataStreamReader | DataFrameReader) -> Mapping[str, str]:
    """The options set on a pyspark reader so far, keys as they were written: the JVM reader
    keeps them (`extraOptions`, a case-insensitive map of the original keys)."""
    options = reader._jreader.extraOptions()
    if options.isEmpty():
        return NO_OPTIONS
    jvm: Any = reader._spark._jvm
    return dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(options.originalMap()))


def _schema_given(reader: DataStreamReader | DataFrameReader) -> bool:
    return bool(reader._jreader.userSpecifiedSchema().isDefined())


@contextmanager
def resolved_reads(resolve: Resolver) -> Iterator[None]:
    """While inside, `table(name)` of the stream reader, the batch reader and the session asks
    `resolve` first. The pipeline files call these methods on pyspark's own objects, so the
    methods are replaced on the classes for the duration."""
    originals = (DataStreamReader.table, DataFrameReader.table, SparkSession.table)

    def stream_table(self: DataStreamReader, tableName: str) -> DataFrame:
        if _schema_given(self):  # Spark's own refusal: a table has its schema
            return originals[0](self, tableName)
        df = resolve(dataset_name(tableName), True, reader_options(self))
        return df if df is not None else originals[0](self, tableName)

    def batch_table(self: DataFrameReader, tableName: str) -> DataFrame:
        if _schema_given(self):
            return originals[1](self, tableName)
        df = resolve(dataset_name(tableName), False, reader_options(self))
        return df if df is not None else originals[1](self, tableName)

    def session_table(self: SparkSession, tableName: str) -> DataFrame:
        df = resolve(dataset_name(tableName), False, NO_OPTIONS)
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
