"""The legacy `dlt` module, which pipelines written before 2025 import and Databricks still runs
(the DLT Python language reference, https://docs.databricks.com/aws/en/dlt/python-ref).

Each name is the `dp` (`pyspark.pipelines`) function it became, looked up on `dp` when it is
called: while pipeline files load, that is the local runtime's stand-in (dp_extensions.py), so a
`@dlt.table` and a `@dp.table` are one implementation. `dlt.read` / `dlt.read_stream` are
`spark.read.table` / `spark.readStream.table` in the session of the code that calls them
(engine/pipeline_session.py), and the `LIVE.` prefix they and `spark.table` accept is reads.py's.

This module is what `import dlt` gives a pipeline file, and only a pipeline file
(`file_builtins`, which the loader runs each file with): a `dlt` package installed for something
else (dlthub's data load tool on PyPI) stays what every other module imports, including the
modules a pipeline file imports.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import DeclarationError

NAME = "dlt"
__all__ = ["append_flow", "apply_changes", "apply_changes_from_snapshot",
           "create_auto_cdc_flow", "create_auto_cdc_from_snapshot_flow", "create_sink",
           "create_streaming_live_table", "create_streaming_table", "create_target_table",
           "expect", "expect_all", "expect_all_or_drop", "expect_all_or_fail", "expect_or_drop",
           "expect_or_fail", "materialized_view", "read", "read_stream", "table",
           "temporary_view", "view"]


def _dp(name: str) -> Any:
    """`dp.<name>` as it is now (a stand-in while files load)."""
    return getattr(dp, name)


# -- datasets (Databricks' pages dlt-ref/dlt-python-ref-table, -view, -streaming-table) -----
def table(*args: Any, temporary: bool | None = None, **kwargs: Any) -> Any:
    """`@dlt.table`: `dp.table`; `temporary`, the legacy word for `private` (a table the
    pipeline uses and does not publish), is passed as `private`."""
    if temporary is not None:
        if "private" in kwargs:
            raise DeclarationError("dlt.table: give private or temporary (its legacy name), "
                                   "not both", dataset=kwargs.get("name"))
        kwargs["private"] = temporary
    return _dp("table")(*args, **kwargs)


def view(*args: Any, **kwargs: Any) -> Any:
    """`@dlt.view`: a temporary view, `dp.temporary_view`."""
    return _dp("temporary_view")(*args, **kwargs)


def materialized_view(*args: Any, **kwargs: Any) -> Any:
    return _dp("materialized_view")(*args, **kwargs)


def temporary_view(*args: Any, **kwargs: Any) -> Any:
    return _dp("temporary_view")(*args, **kwargs)


def create_streaming_table(*args: Any, **kwargs: Any) -> Any:
    return _dp("create_streaming_table")(*args, **kwargs)


def create_target_table(*args: Any, **kwargs: Any) -> Any:
    """A deprecated name of `create_streaming_table`."""
    return _dp("create_streaming_table")(*args, **kwargs)


def create_streaming_live_table(*args: Any, **kwargs: Any) -> Any:
    """A deprecated name of `create_streaming_table`."""
    return _dp("create_streaming_table")(*args, **kwargs)


# -- reads -----------------------------------------------------------------------------------------
def read(name: str) -> DataFrame:
    """A batch read of a dataset of the pipeline (or a catalog table)."""
    return SparkSession.active().read.table(name)


def read_stream(name: str) -> DataFrame:
    """A streaming read of a dataset of the pipeline (or a catalog table)."""
    return SparkSession.active().readStream.table(name)


# -- flows, sinks, AUTO CDC ------------------------------------------------------------------------
def append_flow(*args: Any, **kwargs: Any) -> Any:
    return _dp("append_flow")(*args, **kwargs)


def create_sink(*args: Any, **kwargs: Any) -> Any:
    return _dp("create_sink")(*args, **kwargs)


def apply_changes(*args: Any, **kwargs: Any) -> Any:
    """The legacy name of `create_auto_cdc_flow` (the same signature)."""
    return _dp("create_auto_cdc_flow")(*args, **kwargs)


def create_auto_cdc_flow(*args: Any, **kwargs: Any) -> Any:
    return _dp("create_auto_cdc_flow")(*args, **kwargs)


def apply_changes_from_snapshot(*args: Any, **kwargs: Any) -> Any:
    """The legacy name of `create_auto_cdc_from_snapshot_flow` (the same signature)."""
    return _dp("create_auto_cdc_from_snapshot_flow")(*args, **kwargs)


def create_auto_cdc_from_snapshot_flow(*args: Any, **kwargs: Any) -> Any:
    return _dp("create_auto_cdc_from_snapshot_flow")(*args, **kwargs)


# -- expectations ---------------------------------------------------------------------------------
def expect(*args: Any, **kwargs: Any) -> Any:
    return _dp("expect")(*args, **kwargs)


def expect_or_drop(*args: Any, **kwargs: Any) -> Any:
    return _dp("expect_or_drop")(*args, **kwargs)


def expect_or_fail(*args: Any, **kwargs: Any) -> Any:
    return _dp("expect_or_fail")(*args, **kwargs)


def expect_all(*args: Any, **kwargs: Any) -> Any:
    return _dp("expect_all")(*args, **kwargs)


def expect_all_or_drop(*args: Any, **kwargs: Any) -> Any:
    return _dp("expect_all_or_drop")(*args, **kwargs)


def expect_all_or_fail(*args: Any, **kwargs: Any) -> Any:
    return _dp("expect_all_or_fail")(*args, **kwargs)


# -- what a pipeline file imports -----------------------------------------------------------------
def file_builtins() -> dict[str, Any]:
    """Python's builtins for one pipeline file, but that its `import dlt` (and `from dlt import
    ...`) is this module; every other import is Python's, made as it would be."""
    this = sys.modules[__name__]

    def pipeline_import(name: str, globals: Any = None, locals: Any = None,
                        fromlist: Any = (), level: int = 0) -> Any:
        if name == NAME and level == 0:
            return this
        return builtins.__import__(name, globals, locals, fromlist, level)

    return {**builtins.__dict__, "__import__": pipeline_import}
