"""What both AUTO CDC declarations take alike, checked alike: `create_auto_cdc_flow` (spec.py) and
`create_auto_cdc_from_snapshot_flow` (from_snapshot/spec.py) name columns the same way and
store the same SCD types with the same history columns.

A wrong argument is a `DeclarationError` about the flow's target, raised while the pipeline file
runs: `create_auto_cdc_flow: stored_as_scd_type must be 1 or 2, got 3`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column

from exactly_once.errors import DeclarationError

ColumnLike = str | Column


def column_name(column: Column) -> str:
    """The name a bare column reference stands for (F.col("order_id") -> "order_id").

    A classic Column holds its JVM expression as `_jc`, which pyspark's type stubs do not
    declare; the local runtime only runs classic Spark.
    """
    jvm_column: Any = getattr(column, "_jc", None)
    return str(jvm_column.toString()) if jvm_column is not None else str(column)


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
        """`columns` as names: strings as they are, bare column references by their name."""
        names = []
        for c in columns:
            if isinstance(c, str):
                names.append(c)
            else:  # a bare column reference, e.g. F.col("order_id")
                name = column_name(c)
                if not name.replace("_", "").isalnum():
                    raise self.error(f"{arg} takes column names, got the expression {name}")
                names.append(name)
        return tuple(names)

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

