"""`create_auto_cdc_flow` with the Databricks signature, for local runs.

pyspark 4.2's own function builds Spark Connect columns, accepts SCD1 only and lacks several
Databricks parameters; pipeline files are written against Databricks, so locally this one stands
in for it (see `databricks_api.install`). `once` is the only Databricks parameter not supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry
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
    # the target's table_properties, when `create_streaming_table` declared it first
    target_properties: Mapping[str, str] = field(default_factory=dict)

    def tombstone_gc_seconds(self, properties: Mapping[str, str] | None = None) -> float:
        """Tombstone retention: the target's table property, else Databricks' default."""
        return tombstone_gc_seconds({**self.target_properties, **(properties or {})})


def _expr(value: ColumnLike | None) -> Column | None:
    if value is None or isinstance(value, Column):
        return value
    return F.expr(value)


def _names(arg: str, columns: list[ColumnLike] | None) -> tuple[str, ...] | None:
    if columns is None:
        return None
    names = []
    for c in columns:
        if isinstance(c, str):
            names.append(c)
        else:  # a bare column reference, e.g. F.col("order_id")
            name = str(c._jc.toString()) if hasattr(c, "_jc") else str(c)
            if not name.replace("_", "").isalnum():
                raise TypeError(f"{arg} takes column names, got the expression {name}")
            names.append(name)
    return tuple(names)


def _declared_properties(registry, target: str) -> dict[str, str]:
    output = getattr(registry, "outputs", {}).get(target)
    return dict(getattr(output, "table_properties", None) or {})


def create_auto_cdc_flow(
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
    scd_type = str(stored_as_scd_type)
    if scd_type not in ("1", "2"):
        raise ValueError(f"stored_as_scd_type must be 1 or 2, got {stored_as_scd_type!r}")
    if column_list is not None and except_column_list is not None:
        raise ValueError("give column_list or except_column_list, not both")
    if track_history_column_list is not None and track_history_except_column_list is not None:
        raise ValueError("give track_history_column_list or track_history_except_column_list, "
                         "not both")
    if scd_type == "1" and (track_history_column_list is not None
                            or track_history_except_column_list is not None):
        raise ValueError("track_history_column_list / track_history_except_column_list need "
                         "stored_as_scd_type=2")
    if scd_type == "2" and apply_as_truncates is not None:
        raise ValueError("apply_as_truncates is supported for SCD type 1 only")
    if not keys:
        raise ValueError("create_auto_cdc_flow needs at least one key")
    registry = get_active_graph_element_registry()
    spec = AutoCdcSpec(
        name=name or target,
        target=target,
        source=source,
        keys=_names("keys", keys),
        sequence_by=_expr(sequence_by),
        apply_as_deletes=_expr(apply_as_deletes),
        column_list=_names("column_list", column_list),
        except_column_list=_names("except_column_list", except_column_list),
        stored_as_scd_type=int(scd_type),
        ignore_null_updates=bool(ignore_null_updates),
        apply_as_truncates=_expr(apply_as_truncates),
        track_history_column_list=_names("track_history_column_list",
                                         track_history_column_list),
        track_history_except_column_list=_names("track_history_except_column_list",
                                                track_history_except_column_list),
        target_properties=_declared_properties(registry, target),
    )
    registry.register_auto_cdc_flow(spec)
