"""What both AUTO CDC declarations take alike, checked alike: `create_auto_cdc_flow` (spec.py) and
`create_auto_cdc_from_snapshot_flow` (from_snapshot/spec.py) name columns the same way and
store the same SCD types with the same history columns."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column

ColumnLike = str | Column


def column_name(column: Column) -> str:
    """The name a bare column reference stands for (F.col("order_id") -> "order_id").

    A classic Column holds its JVM expression as `_jc`, which pyspark's type stubs do not
    declare; the local runtime only runs classic Spark.
    """
    jvm_column: Any = getattr(column, "_jc", None)
    return str(jvm_column.toString()) if jvm_column is not None else str(column)


def column_names(arg: str, columns: list[ColumnLike]) -> tuple[str, ...]:
    """`columns` as names: strings as they are, bare column references by their name."""
    names = []
    for c in columns:
        if isinstance(c, str):
            names.append(c)
        else:  # a bare column reference, e.g. F.col("order_id")
            name = column_name(c)
            if not name.replace("_", "").isalnum():
                raise TypeError(f"{arg} takes column names, got the expression {name}")
            names.append(name)
    return tuple(names)


def optional_column_names(arg: str, columns: list[ColumnLike] | None) -> tuple[str, ...] | None:
    return None if columns is None else column_names(arg, columns)


def checked_scd_type(stored_as_scd_type: int | str,
                     track_history_column_list: list[Any] | None,
                     track_history_except_column_list: list[Any] | None) -> int:
    """`stored_as_scd_type` as 1 or 2, checked with the history column lists that go with it
    (both AUTO CDC declarations take them)."""
    scd_type = str(stored_as_scd_type)
    if scd_type not in ("1", "2"):
        raise ValueError(f"stored_as_scd_type must be 1 or 2, got {stored_as_scd_type!r}")
    if track_history_column_list is not None and track_history_except_column_list is not None:
        raise ValueError("give track_history_column_list or track_history_except_column_list, "
                         "not both")
    if scd_type == "1" and (track_history_column_list is not None
                            or track_history_except_column_list is not None):
        raise ValueError("track_history_column_list / track_history_except_column_list need "
                         "stored_as_scd_type=2")
    return int(scd_type)
