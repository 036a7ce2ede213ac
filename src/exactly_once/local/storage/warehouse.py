"""The warehouse: one Delta table per directory, plus the pipeline's own state.

    <warehouse>/<table>/                                each dataset, readable by any Delta reader
                                                        (or where its declaration's `path` says)
    <warehouse>/event_log/                              the pipeline event log (see event_log.py)
    <warehouse>/_pipeline/checkpoints/<flow>/           streaming checkpoints (what was processed)
    <warehouse>/_pipeline/checkpoints/<flow>/once_query a once flow's writer id (its marks')
    <warehouse>/_pipeline/checkpoints/<flow>/once.json  a once flow (a backfill) that has run
    <warehouse>/_pipeline/auto_cdc/<target>/            AUTO CDC key state (SCD1) or journal (SCD2)
    <warehouse>/_pipeline/auto_cdc/<target>__rejected/  AUTO CDC rows with a NULL key or sequence
    <warehouse>/_pipeline/lock                          the update lock (see lock.py)
    <warehouse>/_pipeline/reset.json                    tables a full refresh is resetting
    <warehouse>/_pipeline/definition.json               the definition the last update finished
                                                        with (execution/schema_check.py)
    <warehouse>/_sinks/<tableName>/                     a delta sink by `tableName` (never reset)
    <warehouse>/_pipeline/locations.json                tables stored at a declared `path`
    <warehouse>/_catalog/                               the local catalog of an update given
                                                        none (local/catalog/): a local warehouse's

This module is the one place that knows the layout, so the runtime, the event log and the quality
tools cannot disagree about it; whether a Delta table exists at a path is `delta_log`'s to say.
An update gives the warehouse its tables' declared definitions (`declaring`): where each is
stored, whether it is published in the session catalog (`private` tables are not), and what
Delta keeps of it (table_definition.py). `show` and the other readers of a finished warehouse
find a table at a declared `path` through `locations.json`.
The root is a local directory or a prefix of an object store (`s3a://bucket/prefix`): every
file this module touches goes through files.py, which reads and writes either.
Spark is imported only where a method needs it: the quality tools import this module for the
paths.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactly_once.errors import GraphError
from exactly_once.local.storage import delta_log, session_entries, table_definition
from exactly_once.local.storage.delta_log import is_delta_table
from exactly_once.local.storage.files import StoragePath, location, remove_tree, write_atomic
from exactly_once.local.storage.table_definition import TableDefinition
from exactly_once.paths import LOCAL_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

PIPELINE_DIR = "_pipeline"
EVENT_LOG_DIR = "event_log"
SINKS_DIR = "_sinks"
CATALOG_DIR = "_catalog"


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
    # Each table's declared definition, by name (`declaring`); none for a warehouse read back.
    definitions: Mapping[str, TableDefinition] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # Spark's JVM resolves a relative path against its own working directory, which is
        # not the command's when it runs in the resident engine (cli/engine_server.py).
        if isinstance(self.root, Path) and not self.root.is_absolute():
            object.__setattr__(self, "root", self.root.absolute())

    def catalog_root(self) -> Path:
        """The local catalog of an update that is given none: the warehouse's own, so that
        warehouses stay apart; a warehouse on an object store keeps it under LOCAL_DIR (the
        catalog is local directories)."""
        if isinstance(self.root, Path):
            return self.root / CATALOG_DIR
        return LOCAL_DIR / CATALOG_DIR.lstrip("_")

    def table_path(self, name: str) -> StoragePath:
        """Where table `name` is stored: its declared `path`, else `<warehouse>/<name>`."""
        if name in self.definitions:
            declared = self.definitions[name].location
        else:
            declared = self._recorded_locations.get(name)
        return location(declared) if declared else self.root / name

    def declaring(self, definitions: Mapping[str, TableDefinition]) -> Warehouse:
        """This warehouse, holding the tables `definitions` declare; their declared locations
        recorded for the readers of the warehouse. A table whose declared location moved while
        its data stayed where it was is an error: an update would start it anew, empty."""
        declared = {name: d.location for name, d in definitions.items() if d.location}
        recorded = self._recorded_locations
        for name in definitions:
            before, now = recorded.get(name), declared.get(name)
            old, new = (location(p) if p else self.root / name for p in (before, now))
            if before != now and is_delta_table(old) and not is_delta_table(new):
                raise GraphError(f"`{name}` is stored at {old}, but its declaration's path is "
                                 f"now {new}: move the table there (or remove it) and run again",
                                 dataset=name)
        if declared != recorded and (declared or self.locations_path().is_file()):
            write_atomic(self.locations_path(), json.dumps(declared, sort_keys=True))
        return replace(self, definitions=dict(definitions))

    def located_tables(self) -> list[str]:
        """The tables stored at a declared `path`, as the last update recorded them."""
        if self.definitions:
            return sorted(n for n, d in self.definitions.items() if d.location)
        return sorted(self._recorded_locations)

    def locations_path(self) -> StoragePath:
        return self.root / PIPELINE_DIR / "locations.json"

    @cached_property
    def _recorded_locations(self) -> dict[str, str]:
        path = self.locations_path()
        return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {}

    def checkpoint_path(self, flow: str) -> StoragePath:
        return self._checkpoints_dir / flow

    def once_marker_path(self, flow: str) -> StoragePath:
        """Written once a once flow has run: in its checkpoint's directory, so what forgets the
        flow's checkpoint (a full refresh of its target) makes it run again."""
        return self.checkpoint_path(flow) / "once.json"

    def once_query_path(self, flow: str) -> StoragePath:
        """A once flow's writer id, as a streaming checkpoint's `metadata` holds its query's:
        new when the checkpoint is, so its writes after a full refresh are not taken for
        those before."""
        return self.checkpoint_path(flow) / "once_query"

    def sink_table_path(self, table_name: str) -> StoragePath:
        """A delta sink's table named by `tableName`: outside `_pipeline`, as a full refresh
        never clears a sink."""
        return self.root / SINKS_DIR / table_name

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
        tables between runs), its declared comment, properties and clustering brought to the
        table first (table_definition.conform). A name left by an update of another warehouse
        in the same session is moved here: an external table's entry is dropped, never its
        files. A private table is not published: an entry of it is dropped; a table of the
        catalog with its name stays the catalog's, as on Databricks."""
        where = str(self.table_path(name).resolve())
        definition = self.definitions.get(name)
        if definition is not None:
            table_definition.conform(spark, where, definition)
        if definition is not None and definition.private:
            self._unregister(spark, name)
            return
        table = session_entries.identifier(spark, name)
        if table is None:  # another catalog's: the local catalog names it (update.py)
            return
        registered = session_entries.registered_entry(spark, table)
        if registered is not None and registered.location == where:
            return
        if registered is not None and session_entries.point_at(spark, registered, where):
            return
        if registered is not None:
            spark.sql(f"DROP TABLE IF EXISTS {table}")
        entry = session_entries.in_its_schema(spark, table)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {entry} USING DELTA LOCATION '{where}'")

    @staticmethod
    def publish_view(spark: SparkSession, name: str, definition: str, comment: str | None,
                     properties: Mapping[str, str]) -> None:
        """View `name` in the session catalog, over the tables `definition` (a query) reads as
        they are registered: what a pipeline's CREATE VIEW publishes."""
        clauses = [] if comment is None else [f"COMMENT {table_definition.sql_literal(comment)}"]
        if properties:
            clauses.append(f"TBLPROPERTIES {table_definition.sql_properties(properties)}")
        view = session_entries.identifier(spark, name)
        assert view is not None, name  # a view of another catalog is refused (registry.py)
        spark.sql(f"CREATE OR REPLACE VIEW {session_entries.in_its_schema(spark, view)} "
                  f"{' '.join(clauses)} AS {definition}")

    def _unregister(self, spark: SparkSession, name: str) -> None:
        """Drop the session catalog's entry of `name` if it points at this warehouse's table;
        anything else of that name is not the pipeline's to drop."""
        table = session_entries.identifier(spark, name)
        try:
            registered = None if table is None \
                else session_entries.registered_entry(spark, table)
        except GraphError:  # the catalog's own table of that name
            return
        if registered is not None and registered.location == str(self.table_path(name).resolve()):
            spark.sql(f"DROP TABLE IF EXISTS {table}")

    def definition(self, name: str) -> TableDefinition:
        """Table `name`'s declared definition (an empty one when it declares nothing)."""
        return self.definitions.get(name) or TableDefinition()

    def create_table(self, spark: SparkSession, name: str, schema: StructType,
                     properties: dict[str, str] | None = None) -> None:
        """An empty Delta table with the declared definition of `name` (`schema`, the
        query's, unless it declares one; `properties` added to its declared ones), so readers
        downstream work before the first row arrives."""
        table_definition.create(spark, str(self.table_path(name).resolve()),
                                self.definition(name), schema, properties)
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
            self._unregister(spark, name)
            for path in [self.table_path(name), self.auto_cdc_state_path(name),
                         self.auto_cdc_rejected_path(name),
                         *(self.checkpoint_path(flow) for flow in flows)]:
                remove_tree(path)


def create_empty_table(spark: SparkSession, path: str, schema: StructType,
                       properties: dict[str, str] | None = None,
                       comment: str | None = None) -> None:
    """An empty Delta table at `path` (unless one is there), of the runtime's own (AUTO CDC
    state): one commit, no Spark job."""
    table_definition.create(spark, path, TableDefinition(comment=comment), schema, properties)


def statistics_of(columns: Sequence[str]) -> dict[str, str]:
    """Table properties for a table of the runtime's own (AUTO CDC state, an SCD2 journal, the
    event log) that keep Delta's per-file statistics to the row count and `columns` (names as
    Delta reads them: `a.b` is field b of struct a), the ones the runtime or a reader of the
    table filters on. Delta's default, the first 32 columns, costs every write of a table an
    analysis of the statistics' expression over each of them: these tables' writes took half
    as much of the driver's CPU again with it (BENCHMARKS.md, "The first update"). The
    pipeline's own tables keep Delta's default, as on Databricks."""
    if not columns:
        return {"delta.dataSkippingNumIndexedCols": "0"}
    return {"delta.dataSkippingStatsColumns": ",".join(columns)}


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
