"""`create_auto_cdc_flow` with the Databricks signature, for local runs, and the spec it declares.

pyspark 4.2's own function builds Spark Connect columns, accepts SCD1 only and lacks several
Databricks parameters; pipeline files are written against Databricks, so locally this one stands
in for it (see `dp_extensions.installed`). `once` is the only Databricks parameter not supported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from exactly_once.table_properties import tombstone_gc_seconds

ColumnLike = str | Column


@dataclass(frozen=True)
class AutoCdcSpec:
    name: str
    target: str
    source: str
    keys: tuple[str, ...]
    sequence_by: Column
    apply_as_deletes: Column | None = None
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] | None = None
    stored_as_scd_type: int = 1
    ignore_null_updates: bool = False
    apply_as_truncates: Column | None = None  # SCD1 only
    track_history_column_list: tuple[str, ...] | None = None  # SCD2 only
    track_history_except_column_list: tuple[str, ...] | None = None  # SCD2 only
    # The target's table_properties: set by the graph once every file has declared its
    # datasets (`PipelineGraph.complete`), wherever the target is declared.
    target_properties: Mapping[str, str] = field(default_factory=dict)

    def tombstone_gc_seconds(self) -> float:
        """Tombstone retention: the target's table property, else Databricks' default."""
        return tombstone_gc_seconds(self.target_properties)


def _column(value: ColumnLike) -> Column:
    return value if isinstance(value, Column) else F.expr(value)


def _optional_column(value: ColumnLike | None) -> Column | None:
    return None if value is None else _column(value)


def _column_name(column: Column) -> str:
    """The name a bare column reference stands for (F.col("order_id") -> "order_id").

    A classic Column holds its JVM expression as `_jc`, which pyspark's type stubs do not
    declare; the local runtime only runs classic Spark.
    """
    jvm_column: Any = getattr(column, "_jc", None)
    return str(jvm_column.toString()) if jvm_column is not None else str(column)


def _names(arg: str, columns: list[ColumnLike]) -> tuple[str, ...]:
    names = []
    for c in columns:
        if isinstance(c, str):
            names.append(c)
        else:  # a bare column reference, e.g. F.col("order_id")
            name = _column_name(c)
            if not name.replace("_", "").isalnum():
                raise TypeError(f"{arg} takes column names, got the expression {name}")
            names.append(name)
    return tuple(names)


def _optional_names(arg: str, columns: list[ColumnLike] | None) -> tuple[str, ...] | None:
    return None if columns is None else _names(arg, columns)


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


@dataclass(frozen=True)
class AutoCdcDeclarations:
    """Databricks' `dp.create_auto_cdc_flow`, bound to the graph the pipeline files fill.

    Bound explicitly instead of found through pyspark's active registry, whose type knows only
    pyspark's own (SCD1-only) AUTO CDC flow.
    """

    register: Callable[[AutoCdcSpec], None]

    def create_auto_cdc_flow(
        self,
        target: str,
        source: str,
        keys: list[ColumnLike],
        sequence_by: ColumnLike,
        ignore_null_updates: bool = False,
        apply_as_deletes: ColumnLike | None = None,
        apply_as_truncates: ColumnLike | None = None,
        column_list: list[ColumnLike] | None = None,
        except_column_list: list[ColumnLike] | None = None,
        stored_as_scd_type: int | str = 1,
        track_history_column_list: list[ColumnLike] | None = None,
        track_history_except_column_list: list[ColumnLike] | None = None,
        name: str | None = None,
        once: bool = False,
    ) -> None:
        if once:
            raise NotImplementedError("local AUTO CDC does not support once=True")
        scd_type = str(checked_scd_type(stored_as_scd_type, track_history_column_list,
                                        track_history_except_column_list))
        if column_list is not None and except_column_list is not None:
            raise ValueError("give column_list or except_column_list, not both")
        if scd_type == "2" and apply_as_truncates is not None:
            raise ValueError("apply_as_truncates is supported for SCD type 1 only")
        if not keys:
            raise ValueError("create_auto_cdc_flow needs at least one key")
        self.register(AutoCdcSpec(
            name=name or target,
            target=target,
            source=source,
            keys=_names("keys", keys),
            sequence_by=_column(sequence_by),
            apply_as_deletes=_optional_column(apply_as_deletes),
            column_list=_optional_names("column_list", column_list),
            except_column_list=_optional_names("except_column_list", except_column_list),
            stored_as_scd_type=int(scd_type),
            ignore_null_updates=bool(ignore_null_updates),
            apply_as_truncates=_optional_column(apply_as_truncates),
            track_history_column_list=_optional_names("track_history_column_list",
                                                      track_history_column_list),
            track_history_except_column_list=_optional_names(
                "track_history_except_column_list", track_history_except_column_list),
        ))
