"""`assert_table`: a table's rows against the rows expected, failing with a diff that names them.

The comparison is pyspark's own (`pyspark.testing.assertDataFrameEqual`: rows as a multiset, or
in order; floats within a tolerance). What it adds is the report a failing test needs: the
rows expected and missing from the table, and the rows the table has that were not expected,
as a small table, before pyspark's own message.

Expected rows are dicts (or Rows) naming the columns they check: the table's other columns are
not compared, unless `columns` names them. Values are taken as the table's column types (text
for a timestamp or a date in ISO 8601, a number for a decimal), so a test writes them as a
fixture file does.

A DataFrame that is a whole Delta table as Delta's reader gives it (the harness's `table(name)`,
`spark.read.format("delta").load(path)`) is read at its latest version as the files its log
names (`snapshot_files.read_latest`): the rows Delta's reader would give at that moment, without
the Spark jobs that rebuild the state of a version the session has not read, about a second
for a table an update has just written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

__all__ = ["assert_table", "TableMismatch"]


class TableMismatch(AssertionError):
    """A table is not what the test expected; the message is the diff."""


def assert_table(actual: Any, expected: Iterable[Mapping[str, Any]] | Any, *,
                 ordered: bool = False, columns: Sequence[str] | None = None,
                 rtol: float = 1e-5, atol: float = 1e-8, name: str | None = None) -> None:
    """Assert that DataFrame `actual` holds `expected` (dicts or Rows, or a DataFrame):
    as a multiset, or in order (`ordered`); only `columns` (default: those the expected rows
    name); floats equal within `rtol` / `atol`. `name` labels the diff (a table's name)."""
    __tracebackhide__ = True  # a failure shows the test's line and the diff
    from pyspark.errors import PySparkAssertionError
    from pyspark.sql import DataFrame, Row
    from pyspark.testing import assertDataFrameEqual

    from exactly_once.local.engine.sql_columns import identifier

    expected_rows = [r.asDict(recursive=True) if isinstance(r, Row) else dict(r)
                     for r in (expected.collect() if isinstance(expected, DataFrame)
                               else expected)]
    wanted = list(columns or dict.fromkeys(c for r in expected_rows for c in r)
                  or actual.columns)
    unknown = [c for c in wanted if c not in actual.columns]
    if unknown:
        raise TableMismatch(f"{name or 'the table'} has no column {', '.join(unknown)}; its "
                            f"columns: {', '.join(actual.columns)}")
    types = {f.name: f.dataType for f in actual.schema.fields}
    table = _latest_files(actual).selectExpr(*map(identifier, wanted))
    got = [tuple(row) for row in table.collect()]
    want = [tuple(_as_type(r.get(c), types[c]) for c in wanted) for r in expected_rows]
    try:
        assertDataFrameEqual([Row(*row) for row in got], [Row(*row) for row in want],
                             checkRowOrder=ordered, rtol=rtol, atol=atol)
    except PySparkAssertionError as err:
        raise TableMismatch(_report(name, wanted, got, want, ordered, rtol, atol)
                            + f"\n\npyspark.testing.assertDataFrameEqual:\n{err}") from None


def _latest_files(df: Any) -> Any:
    """`df` itself, or, when it reads a whole Delta table at its latest version and nothing
    else, the same table read as the files its latest version's log names."""
    from exactly_once.local.storage.snapshot_files import read_latest

    plan = df._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() != "LogicalRelation":
        return df
    try:  # Delta's relation is a file-based one (a subclass of Spark's HadoopFsRelation)
        index = plan.relation().location()
    except Exception:  # noqa: BLE001 - a relation of another kind has no file index
        return df
    if index.getClass().getSimpleName() != "TahoeLogFileIndex" or index.isTimeTravelQuery() \
            or not index.partitionFilters().isEmpty():
        return df
    uri = index.path().toUri()  # a local table as the runtime names it, not as `file:/...`
    where = uri.getPath() if uri.getScheme() in (None, "file") else index.path().toString()
    return read_latest(df.sparkSession, str(where))


def _report(name: str | None, columns: list[str], got: list[tuple], want: list[tuple],
            ordered: bool, rtol: float, atol: float) -> str:
    missing, extra = _difference(want, got, rtol, atol)
    label = name or "the table"
    head = (f"{label}: {len(got)} row(s), {len(want)} expected"
            f" ({'in order' if ordered else 'as a multiset'}; columns {', '.join(columns)})")
    if not missing and not extra:
        return f"{head}: the same rows in another order\n" + _grid(
            columns, [("expected", r) for r in want] + [("table", r) for r in got])
    lines = [f"{head}: {len(missing)} missing, {len(extra)} extra"]
    lines.append(_grid(columns, [("missing", r) for r in missing]
                       + [("extra", r) for r in extra]))
    return "\n".join(lines)


def _difference(want: list[tuple], got: list[tuple], rtol: float, atol: float
                ) -> tuple[list[tuple], list[tuple]]:
    """The expected rows no table row matches, and the table rows left over (each row matched
    once)."""
    left = list(got)
    missing = []
    for row in want:
        match = next((i for i, other in enumerate(left) if _same(row, other, rtol, atol)), None)
        if match is None:
            missing.append(row)
        else:
            left.pop(match)
    return missing, left


def _same(a: tuple, b: tuple, rtol: float, atol: float) -> bool:
    return len(a) == len(b) and all(_close(x, y, rtol, atol) for x, y in zip(a, b, strict=True))


def _close(x: Any, y: Any, rtol: float, atol: float) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=rtol,
                                                                 abs_tol=atol)
    return bool(x == y)


def _grid(columns: list[str], rows: list[tuple[str, tuple]]) -> str:
    """Rows as an aligned table, each after its label."""
    header = ["", *columns]
    body = [[label, *(_shown(v) for v in row)] for label, row in rows]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return "\n".join("  " + " | ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True))
                     .rstrip() for r in [header, *body])


def _shown(value: Any) -> str:
    return "NULL" if value is None else str(value)


def _as_type(value: Any, data_type: Any) -> Any:
    """An expected value as the column's type has it: ISO text as a timestamp or date, a number
    as a decimal, a whole number as a float for a float column."""
    from pyspark.sql.types import (
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        TimestampNTZType,
        TimestampType,
    )

    if value is None:
        return None
    if isinstance(data_type, TimestampNTZType) and isinstance(value, str):
        return datetime.fromisoformat(value)
    if isinstance(data_type, TimestampType) and isinstance(value, (str, datetime)):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")) \
            if isinstance(value, str) else value
        # A time without a zone is the session's (the runtime's sessions run in UTC).
        return _local(moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc))
    if isinstance(data_type, DateType) and isinstance(value, str):
        return date.fromisoformat(value)
    if isinstance(data_type, DecimalType) and isinstance(value, (int, float, str)):
        return Decimal(str(value)).quantize(Decimal(1).scaleb(-data_type.scale))
    if isinstance(data_type, (DoubleType, FloatType)) and isinstance(value, int):
        return float(value)
    return value


def _local(moment: datetime) -> datetime:
    """An aware time as pyspark collects a TIMESTAMP: a naive time in this process's zone."""
    return moment.astimezone().replace(tzinfo=None)
