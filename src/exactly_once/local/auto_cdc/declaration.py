"""What both AUTO CDC declarations take alike, checked alike: `create_auto_cdc_flow` (spec.py) and
`create_auto_cdc_from_snapshot_flow` (from_snapshot/spec.py) name columns the same way and
store the same SCD types with the same history columns.

A wrong argument is a `DeclarationError` about the flow's target, raised while the pipeline file
runs: `create_auto_cdc_flow: stored_as_scd_type must be 1 or 2, got 3`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from exactly_once.errors import DeclarationError
from exactly_once.local.engine.sql_columns import identifier

ColumnLike = str | Column


def name_parts(column: ColumnLike) -> list[str] | None:
    """The parts of the column name `column` stands for, as Spark reads a name: a dot between
    a struct and its field, a part with a dot or a backtick in backticks, its backtick doubled
    (`F.col("a.b")` -> a, b; `F.col("`a.b`")` -> a.b). A string is read as `F.col` reads it,
    as pyspark's `create_auto_cdc_flow` does; an `F.expr` as SQL. None: an expression, not a
    name. Raises AnalysisException for a name that breaks those rules.

    A classic Column holds its JVM column as `_jc`, which pyspark's type stubs do not declare;
    the local runtime only runs classic Spark.
    """
    if isinstance(column, str):
        if "." not in column and "`" not in column:
            return [column]  # the parser's answer, without a call into the JVM
        column = F.col(column)
    jvm_column: Any = getattr(column, "_jc", None)
    if jvm_column is None:
        return None
    node = jvm_column.node()
    if node.getClass().getSimpleName() == "SqlExpression":  # F.expr("...")
        session: Any = SparkSession.active()
        node = session._jsparkSession.sessionState().sqlParser().parseExpression(
            node.expression())
    if node.getClass().getSimpleName() != "UnresolvedAttribute":
        return None
    parts = node.nameParts()
    return [str(parts.apply(i)) for i in range(parts.length())]


def spelled_as_in(names: tuple[str, ...] | None,
                  columns: Sequence[str]) -> tuple[str, ...] | None:
    """`names` as `columns` spell them: Spark resolves a column's name whatever its case
    (`spark.sql.caseSensitive` is off, as on Databricks), so `keys=["ID"]` names column `id`,
    and the runtime compares names as strings once they are spelled alike. A name `columns`
    lack stays as it is, for the caller's check to name."""
    if names is None:
        return None
    spelled = {c.lower(): c for c in columns}
    return tuple(spelled.get(n.lower(), n) for n in names)


@dataclass(frozen=True)
class Declaration:
    """One call of an AUTO CDC declaration (`create_auto_cdc_flow`, ...) into `target`."""

    function: str
    target: str

    def error(self, message: str) -> DeclarationError:
        """`message` about this call: the dataset is its target, the function named first."""
        return DeclarationError(f"{self.function}: {message}", dataset=self.target)

    def keys(self, keys: list[ColumnLike]) -> tuple[str, ...]:
        if not keys:
            raise DeclarationError(f"{self.function} needs at least one key", dataset=self.target)
        return self.column_names("keys", keys)

    def column_names(self, arg: str, columns: list[ColumnLike]) -> tuple[str, ...]:
        """`columns` as the names of top-level columns (`name_parts`): "order_id",
        F.col("order_id"), "`amount.usd`"."""
        return tuple(self._column_name(arg, c) for c in columns)

    def _column_name(self, arg: str, column: ColumnLike) -> str:
        try:
            parts = name_parts(column)
        except AnalysisException:
            raise self.error(f"{arg}: {column} is not a column's name: a name with a backtick "
                             f"is written in backticks, the backtick doubled "
                             f"({identifier(str(column))})") from None
        if parts is None:
            shown = getattr(column, "_jc", column)  # a classic Column: its JVM column's text
            raise self.error(f"{arg} takes column names, got the expression {shown}")
        if len(parts) > 1:
            *struct, field = parts
            path = ".".join(parts)
            raise self.error(f"{arg}: `{path}` is the field {field} of struct {'.'.join(struct)}; "
                             f"a column whose name has a dot is written in backticks "
                             f"({identifier(path)})")
        return parts[0]

    def optional_column_names(self, arg: str,
                              columns: list[ColumnLike] | None) -> tuple[str, ...] | None:
        return None if columns is None else self.column_names(arg, columns)

    def scd_type(self, stored_as_scd_type: int | str,
                 track_history_column_list: list[Any] | None,
                 track_history_except_column_list: list[Any] | None) -> int:
        """`stored_as_scd_type` as 1 or 2, checked with the history column lists that go with
        it."""
        scd_type = str(stored_as_scd_type)
        if scd_type not in ("1", "2"):
            raise self.error(f"stored_as_scd_type must be 1 or 2, got {stored_as_scd_type!r}")
        if (track_history_column_list is not None
                and track_history_except_column_list is not None):
            raise self.error("give track_history_column_list or "
                             "track_history_except_column_list, not both")
        if scd_type == "1" and (track_history_column_list is not None
                                or track_history_except_column_list is not None):
            raise self.error("track_history_column_list / track_history_except_column_list "
                             "need stored_as_scd_type=2")
        return int(scd_type)

