"""`read_files(...)` in pipeline SQL: the one seam between the SQL layer and Auto Loader.

Databricks' `read_files` table-valued function (https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files)
reads files as a batch, and under `STREAM read_files(...)` as Auto Loader's stream. The SQL
layer (sql_queries.py) calls `read_files` with the path, the options (name => value, as
written) and whether the statement streams it, and puts the DataFrame returned where the call
was written.

Auto Loader locally (issue 51, item 2) is the other half of this: it sets `reader` to its
function of that signature. Until it does, a statement that reads files is refused while the
file loads (`check_supported`), in one line naming the file, the line and the statement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame, SparkSession

from exactly_once.local.graph.sql_files import Statement

# (session, path, options, streaming) -> the files' DataFrame
Reader = Callable[[SparkSession, str, Mapping[str, str], bool], DataFrame]
reader: Reader | None = None


def check_supported(statement: Statement) -> None:
    """Refuse `statement`'s read_files while no reader is installed."""
    if reader is None:
        raise statement.error("read_files is not supported by the local runtime yet "
                              "(Auto Loader)")


def read_files(spark: SparkSession, path: str, options: Mapping[str, str],
               streaming: bool) -> DataFrame:
    """The DataFrame of `read_files(path, options...)`, a stream when `streaming`."""
    if reader is None:  # check_supported refused the statement while its file loaded
        raise RuntimeError("read_files has no reader")
    return reader(spark, path, options, streaming)
