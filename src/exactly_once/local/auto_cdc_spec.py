"""`create_auto_cdc_flow` with the Databricks signature, for local runs.

pyspark 4.2's own function builds Spark Connect columns, accepts SCD1 only and lacks several
Databricks parameters; pipeline files are written against Databricks, so locally this one stands
in for it (see `databricks_api.install`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry
from pyspark.sql import Column
from pyspark.sql import functions as F

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
    unsupported = {
        "ignore_null_updates": ignore_null_updates,
        "apply_as_truncates": apply_as_truncates,
        "track_history_column_list": track_history_column_list,
        "track_history_except_column_list": track_history_except_column_list,
        "once": once,
    }
    used = [k for k, v in unsupported.items() if v]
    if used or str(stored_as_scd_type) != "1":
        raise NotImplementedError(f"local AUTO CDC supports SCD type 1 without {used or 'SCD2'}")
    if column_list is not None and except_column_list is not None:
        raise ValueError("give column_list or except_column_list, not both")
    if not keys:
        raise ValueError("create_auto_cdc_flow needs at least one key")
    spec = AutoCdcSpec(
        name=name or target,
        target=target,
        source=source,
        keys=_names("keys", keys),
        sequence_by=_expr(sequence_by),
        apply_as_deletes=_expr(apply_as_deletes),
        column_list=_names("column_list", column_list),
        except_column_list=_names("except_column_list", except_column_list),
        stored_as_scd_type=int(stored_as_scd_type),
    )
    get_active_graph_element_registry().register_auto_cdc_flow(spec)
