"""`create_auto_cdc_from_snapshot_flow` (legacy `apply_changes_from_snapshot`) with the Databricks
signature, for local runs, and the spec it declares.

Databricks' reference (docs/auto_cdc.md, "AUTO CDC FROM SNAPSHOT"): the target is a streaming
table; `source` is either the name of a table or view, snapshotted once per update with the
update's processing time as its version, or a function `next_snapshot_and_version(latest)`
returning `(DataFrame, version)` or None, asked again and again until it returns None. With
`once=True` (https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes-from-snapshot)
the flow runs in one update only, and again when a full refresh recreates the target. Open-source
pyspark has no such function; `dp_extensions.installed` puts this one on `dp` while files load.
A wrong argument is a `DeclarationError` about the target (declaration.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

from exactly_once.local.auto_cdc.declaration import ColumnLike, Declaration

# `next_snapshot_and_version(latest_version)`: the snapshot after `latest_version` (None before
# the first) with its version, or None when there is none yet.
NextSnapshot = Callable[[Any], tuple[DataFrame, Any] | None]
KIND = "AUTO CDC FROM SNAPSHOT"


@dataclass(frozen=True)
class SnapshotCdcSpec:
    name: str
    target: str
    source: str | NextSnapshot  # a table or view, or next_snapshot_and_version
    keys: tuple[str, ...]
    stored_as_scd_type: int = 1
    track_history_column_list: tuple[str, ...] | None = None  # SCD2 only
    track_history_except_column_list: tuple[str, ...] | None = None  # SCD2 only
    once: bool = False  # snapshots asked for in one update only (again after a full refresh)
    # The target's table_properties, given by the graph once every file has run.
    target_properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def source_table(self) -> str | None:
        """The table or view snapshotted each update; None when the source is a function."""
        return self.source if isinstance(self.source, str) else None

    @property
    def source_function(self) -> NextSnapshot | None:
        """next_snapshot_and_version; None when the source is a table or view."""
        return None if isinstance(self.source, str) else self.source

    def source_label(self) -> str:
        """The source as messages name it: the table, or `function()`."""
        if isinstance(self.source, str):
            return f"`{self.source}`"
        return f"{getattr(self.source, '__name__', 'next_snapshot_and_version')}()"

    def kind(self) -> str:
        return f"{KIND} SCD{self.stored_as_scd_type}"


@dataclass(frozen=True)
class SnapshotCdcDeclarations:
    """Databricks' `dp.create_auto_cdc_from_snapshot_flow`, bound to the graph the files fill."""

    register: Callable[[SnapshotCdcSpec], None]

    def create_auto_cdc_from_snapshot_flow(
        self,
        target: str,
        source: str | NextSnapshot,
        keys: list[ColumnLike],
        stored_as_scd_type: int | str = 1,
        track_history_column_list: list[ColumnLike] | None = None,
        track_history_except_column_list: list[ColumnLike] | None = None,
        once: bool = False,
    ) -> None:
        declaration = Declaration("create_auto_cdc_from_snapshot_flow", target)
        if not (isinstance(source, str) and source) and not callable(source):
            raise declaration.error("source must be the name of a table or view, or a function "
                                    f"next_snapshot_and_version(latest_version); got {source!r}")
        scd_type = declaration.scd_type(stored_as_scd_type, track_history_column_list,
                                        track_history_except_column_list)
        names = declaration.optional_column_names
        self.register(SnapshotCdcSpec(
            name=target,  # Databricks names the flow after its target
            target=target,
            source=source,
            keys=declaration.keys(keys),
            stored_as_scd_type=scd_type,
            track_history_column_list=names("track_history_column_list",
                                            track_history_column_list),
            track_history_except_column_list=names("track_history_except_column_list",
                                                   track_history_except_column_list),
            once=bool(once),
        ))
