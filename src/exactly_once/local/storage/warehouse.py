"""The warehouse: one Delta table per directory, plus the pipeline's own state.

    <warehouse>/<table>/                                each dataset, readable by any Delta reader
    <warehouse>/event_log/                              the pipeline event log (see event_log.py)
    <warehouse>/_pipeline/checkpoints/<flow>/           streaming checkpoints (what was processed)
    <warehouse>/_pipeline/auto_cdc/<target>/            AUTO CDC key state (SCD1) or journal (SCD2)
    <warehouse>/_pipeline/auto_cdc/<target>__rejected/  AUTO CDC rows with a NULL key or sequence
    <warehouse>/_pipeline/lock                          the update lock (see lock.py)
    <warehouse>/_pipeline/reset.json                    tables a full refresh is resetting
    <warehouse>/_pipeline/definition.json               the definition the last update finished
                                                        with (execution/schema_check.py)

This module is the one place that knows the layout, so the runtime, the event log and the quality
tools cannot disagree about it; whether a Delta table exists at a path is `delta_log`'s to say.
The root is a local directory or a prefix of an object store (`s3a://bucket/prefix`): every
file this module touches goes through files.py, which reads and writes either.
Spark is imported only where a method needs it: the quality tools import this module for the
paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactly_once.errors import GraphError
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.delta_log import is_delta_table
from exactly_once.local.storage.files import StoragePath, remove_tree, write_atomic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

PIPELINE_DIR = "_pipeline"
EVENT_LOG_DIR = "event_log"


@dataclass(frozen=True)
class AutoCdcTables:
    """The Delta tables one AUTO CDC target is written through, as absolute path strings (what
    Spark's readers and writers take)."""

    target: str  # the dataset itself
    state: str  # SCD1: each key's last applied sequence and tombstone; SCD2: the event journal
    rejected: str  # events with a NULL key or sequence, with the reason (never merged)


@dataclass(frozen=True)
class Warehouse:
    root: StoragePath

    def __post_init__(self) -> None:
        # Spark's JVM resolves a relative path against its own working directory, which is
        # not the command's when it runs in the resident engine (cli/engine_server.py).
        if isinstance(self.root, Path) and not self.root.is_absolute():
            object.__setattr__(self, "root", self.root.absolute())

    def table_path(self, name: str) -> StoragePath:
        return self.root / name

    def checkpoint_path(self, flow: str) -> StoragePath:
        return self._checkpoints_dir / flow

    def checkpoints(self) -> list[StoragePath]:
        """Every flow's checkpoint that exists."""
        try:
            return sorted(self._checkpoints_dir.iterdir(), key=str)
        except FileNotFoundError:
            return []

    @property
    def _checkpoints_dir(self) -> StoragePath:
        return self.root / PIPELINE_DIR / "checkpoints"

    def auto_cdc_state_path(self, target: str) -> StoragePath:
        return self.root / PIPELINE_DIR / "auto_cdc" / target

    def auto_cdc_rejected_path(self, target: str) -> StoragePath:
        """Next to the target's state, so a full refresh of the target finds both."""
        return self.root / PIPELINE_DIR / "auto_cdc" / f"{target}__rejected"

    def auto_cdc_tables(self, target: str) -> AutoCdcTables:
        return AutoCdcTables(target=str(self.table_path(target).resolve()),
                             state=str(self.auto_cdc_state_path(target).resolve()),
                             rejected=str(self.auto_cdc_rejected_path(target).resolve()))

    def event_log_path(self) -> StoragePath:
        """Outside `_pipeline`: a full refresh keeps it, as Databricks keeps its event log."""
        return self.root / EVENT_LOG_DIR

    def definition_path(self) -> StoragePath:
        return self.root / PIPELINE_DIR / "definition.json"

    def lock_path(self) -> StoragePath:
        return self.root / PIPELINE_DIR / "lock"

    def has_table(self, name: str) -> bool:
        return is_delta_table(self.table_path(name))

    def delta_paths(self, tables: list[str]) -> list[StoragePath]:
        """Every Delta table the runtime writes for `tables`: the tables themselves, their AUTO
        CDC state and rejected rows, and the event log."""
        return [*(path for name in tables for path in (
            self.table_path(name), self.auto_cdc_state_path(name),
            self.auto_cdc_rejected_path(name))), self.event_log_path()]

    def clear_half_created(self, tables: list[str]) -> list[StoragePath]:
        """Remove what a run killed while creating one of these Delta tables left (no committed
        version: `delta_log.is_half_created`), so this run creates the table afresh; the paths
        removed. Delta refuses to create a table over such a directory, and the update would
        then fail the same way every time."""
        cleared = [path for path in self.delta_paths(tables) if delta_log.is_half_created(path)]
        for path in cleared:
            remove_tree(path)
        return cleared

    def row_count(self, spark: SparkSession, name: str) -> int:
        """From the table's commits when they say (no Spark job), else by counting."""
        path = self.table_path(name).resolve()
        rows = delta_log.row_count(path)
        if rows is None:
            rows = spark.read.format("delta").load(str(path)).count()
        return rows

    def register(self, spark: SparkSession, name: str) -> None:
        """Make `name` resolve to this warehouse's table in the session catalog (which forgets
        tables between runs). A name left by an update of another warehouse in the same session
        is moved here: an external table's entry is dropped, never its files."""
        location = str(self.table_path(name).resolve())
        registered = _registered_location(spark, name)
        if registered is not None and registered.removeprefix("file:") == location:
            return
        if registered is not None:
            spark.sql(f"DROP TABLE IF EXISTS `{name}`")
        spark.sql(f"CREATE TABLE IF NOT EXISTS `{name}` USING DELTA LOCATION '{location}'")

    def create_table(self, spark: SparkSession, name: str, schema: StructType,
                     properties: dict[str, str] | None = None, comment: str | None = None) -> None:
        """An empty Delta table, so readers downstream work before the first row arrives."""
        create_empty_table(spark, str(self.table_path(name).resolve()), schema, properties,
                           comment)
        self.register(spark, name)

    def reset_checkpoint(self, flow: str) -> None:
        """Forget what `flow` has read: its next run reads its sources from the start."""
        remove_tree(self.checkpoint_path(flow))

    def reset_intent_path(self) -> StoragePath:
        return self.root / PIPELINE_DIR / "reset.json"

    def unfinished_reset(self) -> list[str]:
        """The tables of a full refresh whose update did not finish (killed, or failed): the
        next update resets them again. A reset deletes a table, its state and checkpoints one
        after the other, so a kill in between can leave a table without its checkpoint's
        data, or part of a table's log; only a whole reset and recompute is safe."""
        path = self.reset_intent_path()
        return list(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else []

    def begin_reset(self, tables: list[str]) -> None:
        """Record `tables` as being reset (atomically) before anything of them is deleted."""
        if not tables:
            return
        write_atomic(self.reset_intent_path(), json.dumps(sorted(tables)))

    def end_reset(self) -> None:
        """The update that reset the tables recomputed them all."""
        self.reset_intent_path().unlink(missing_ok=True)

    def reset(self, spark: SparkSession, tables: dict[str, list[str]]) -> None:
        """Full refresh of `tables` (table -> the flows writing it): drop each table with the
        flows' checkpoints and its AUTO CDC state. Other tables and their state stay."""
        for name, flows in tables.items():
            spark.sql(f"DROP TABLE IF EXISTS `{name}`")
            for path in [self.table_path(name), self.auto_cdc_state_path(name),
                         self.auto_cdc_rejected_path(name),
                         *(self.checkpoint_path(flow) for flow in flows)]:
                remove_tree(path)


def _registered_location(spark: SparkSession, name: str) -> str | None:
    """Where the session catalog's `name` points (None if unknown), read from the catalog's own
    metadata: no query, no Delta snapshot (a tenth of the cost of CREATE TABLE IF NOT EXISTS).
    A managed table of that name is the user's own: refused, since dropping it deletes it."""
    state = spark._jsparkSession.sessionState()  # no public API says where a table points
    catalog, identifier = state.catalog(), state.sqlParser().parseTableIdentifier(f"`{name}`")
    if not catalog.tableExists(identifier):
        return None
    table = catalog.getTableRawMetadata(identifier)
    kind = table.tableType().name()
    if kind != "EXTERNAL":
        raise GraphError(f"the session catalog has a {kind.lower()} table `{name}` of its own; "
                         "the pipeline's table of that name cannot be registered over it")
    return str(table.location())


def create_empty_table(spark: SparkSession, path: str, schema: StructType,
                       properties: dict[str, str] | None = None,
                       comment: str | None = None) -> None:
    """An empty Delta table at `path` (unless one is there): one commit, no Spark job, where
    writing an empty DataFrame runs a write job for no rows."""
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    for key, value in (properties or {}).items():
        builder = builder.property(key, value)
    if comment:
        builder = builder.comment(comment)
    builder.execute()


def table_columns(spark: SparkSession, path: str) -> list[str]:
    """The columns of the Delta table at `path`: from its log (no query plan, no Delta
    snapshot), else, when the log cannot tell, through Delta's reader."""
    columns = delta_log.column_names(path)
    if columns is None:
        columns = spark.read.format("delta").load(path).columns
    return columns


def as_written(schema: StructType) -> StructType:
    """`schema` as writing a DataFrame of it stores it: every field, element and value
    nullable, so creating a table from it accepts what a write would have."""
    from pyspark.sql.types import StructType

    def nullable(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: True if key in ("nullable", "containsNull", "valueContainsNull")
                    else nullable(value) for key, value in node.items()}
        if isinstance(node, list):
            return [nullable(item) for item in node]
        return node

    return StructType.fromJson(nullable(schema.jsonValue()))
