"""`create_auto_cdc_flow` with the Databricks signature, for local runs, and the spec it declares.

pyspark 4.2's own function builds Spark Connect columns, accepts SCD1 only and lacks several
Databricks parameters; pipeline files are written against Databricks, so locally this one stands
in for it (see `dp_extensions.installed`). Every parameter of Databricks' reference
(https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes) is taken:
`system_sequence_by` and `columns_to_update` are refused, the others work as documented:

* `ignore_null_updates` / `ignore_null_updates_column_list` /
  `ignore_null_updates_except_column_list` (one of the three): the NULLs of an update keep the
  target's values, on every column, on the columns listed, or on every column but those listed
  (SQL `IGNORE NULL UPDATES [ON {columnList | * EXCEPT (exceptColumnList)}]`), SCD1 and SCD2;
  never on a key;
* `once`: a one-time flow (a backfill): its source is read as a batch, applied once, and again
  when a full refresh recreates the target (CREATE FLOW's `AUTO CDC ONCE`).

A wrong argument is a `DeclarationError` about the target (declaration.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F

from exactly_once.errors import DeclarationError, first_line
from exactly_once.local.auto_cdc.declaration import ColumnLike, Declaration
from exactly_once.local.engine.sql_parser import parse_error
from exactly_once.table_properties import tombstone_gc_seconds


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
    ignore_null_updates_column_list: tuple[str, ...] | None = None
    ignore_null_updates_except_column_list: tuple[str, ...] | None = None
    once: bool = False  # read the source as a batch, apply it once
    apply_as_truncates: Column | None = None  # SCD1 only
    track_history_column_list: tuple[str, ...] | None = None  # SCD2 only
    track_history_except_column_list: tuple[str, ...] | None = None  # SCD2 only
    comment: str | None = None  # SQL's CREATE FLOW ... COMMENT (the Python function has none)
    # The target's table_properties: set by the graph once every file has declared its
    # datasets (`PipelineGraph.complete`), wherever the target is declared.
    target_properties: Mapping[str, str] = field(default_factory=dict)

    def tombstone_gc_seconds(self) -> float:
        """Tombstone retention: the target's table property, else Databricks' default."""
        return tombstone_gc_seconds(self.target_properties)


def _column(value: ColumnLike, arg: str, flow: str, source: str, target: str) -> Column:
    """`value` as a Column; SQL text parsed now, as F.expr parses it only when a query is
    analyzed, and reported in the words of dry-run's analysis of the flow."""
    if isinstance(value, Column):
        return value
    error = parse_error(value)
    if error is not None:
        raise DeclarationError(f"AUTO CDC flow `{flow}`: {arg} does not analyze against "
                               f"`{source}`: {first_line(error)}", dataset=target)
    return F.expr(value)


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
        ignore_null_updates_column_list: list[ColumnLike] | None = None,
        ignore_null_updates_except_column_list: list[ColumnLike] | None = None,
        system_sequence_by: ColumnLike | None = None,
        columns_to_update: ColumnLike | None = None,
        flow_name: str | None = None,
    ) -> None:
        declaration = Declaration("create_auto_cdc_flow", target)
        # `flow_name` is how `dlt.apply_changes` and Databricks' database replication page
        # (https://docs.databricks.com/aws/en/ldp/database-replication) name the flow.
        if name is not None and flow_name is not None:
            raise declaration.error("give name or flow_name (its older spelling), not both")
        name = name if name is not None else flow_name
        for argument, value in (("system_sequence_by", system_sequence_by),
                                ("columns_to_update", columns_to_update)):
            if value is not None:
                raise declaration.error(f"{argument} is not supported by the local runtime")
        scd_type = declaration.scd_type(stored_as_scd_type, track_history_column_list,
                                        track_history_except_column_list)
        if column_list is not None and except_column_list is not None:
            raise declaration.error("give column_list or except_column_list, not both")
        if scd_type == 2 and apply_as_truncates is not None:
            raise declaration.error("apply_as_truncates is supported for SCD type 1 only")
        names = declaration.optional_column_names
        ignored = names("ignore_null_updates_column_list", ignore_null_updates_column_list)
        not_ignored = names("ignore_null_updates_except_column_list",
                            ignore_null_updates_except_column_list)
        if sum((bool(ignore_null_updates), ignored is not None, not_ignored is not None)) > 1:
            raise declaration.error("give one of ignore_null_updates, "
                                    "ignore_null_updates_column_list or "
                                    "ignore_null_updates_except_column_list")
        keys_ = declaration.keys(keys)
        for key in ignored or ():
            if key.lower() in {k.lower() for k in keys_}:
                raise declaration.error(
                    f"ignore_null_updates_column_list names the key `{key}`: a key identifies "
                    "the row an update is for, and is never ignored")

        def optional(value: ColumnLike | None, arg: str) -> Column | None:
            return None if value is None else _column(value, arg, name or target, source, target)

        self.register(AutoCdcSpec(
            name=name or target,
            target=target,
            source=source,
            keys=keys_,
            sequence_by=_column(sequence_by, "sequence_by", name or target, source, target),
            apply_as_deletes=optional(apply_as_deletes, "apply_as_deletes"),
            column_list=names("column_list", column_list),
            except_column_list=names("except_column_list", except_column_list),
            stored_as_scd_type=scd_type,
            ignore_null_updates=bool(ignore_null_updates),
            ignore_null_updates_column_list=ignored,
            ignore_null_updates_except_column_list=not_ignored,
            once=bool(once),
            apply_as_truncates=optional(apply_as_truncates, "apply_as_truncates"),
            track_history_column_list=names("track_history_column_list",
                                            track_history_column_list),
            track_history_except_column_list=names("track_history_except_column_list",
                                                   track_history_except_column_list),
        ))
