"""Where a declaration is written, as the registry records it (pyspark's SourceCodeLocation):
the line of the Python file that called `dp`, or, while sql_declarations.py translates a SQL
file, the file and line of the statement being translated."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pyspark.pipelines.source_code_location import (
    SourceCodeLocation,
    get_caller_source_code_location,
)

_statement: ContextVar[SourceCodeLocation | None] = ContextVar("sql_statement", default=None)


def caller(stacklevel: int) -> SourceCodeLocation:
    """As pyspark's `get_caller_source_code_location(stacklevel)` for the function calling
    this one; the SQL statement's location while one is translated."""
    return _statement.get() or get_caller_source_code_location(stacklevel + 1)


@contextmanager
def sql_statement(filename: str, line: int) -> Iterator[None]:
    """Declarations made inside are located at `filename`, `line`."""
    token = _statement.set(SourceCodeLocation(filename=filename, line_number=line))
    try:
        yield
    finally:
        _statement.reset(token)
