"""What a warehouse holds, for `exactly-once show`: its tables, and a table's first rows, by
any name the pipeline's code could use (`orders`, `schema.orders`, `catalog.schema.orders`,
or a table of the local catalog such as `samples.nyctaxi.trips`)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import InspectError
from exactly_once.local.catalog.scope import ReadScope
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import PIPELINE_DIR, Warehouse


def table_names(warehouse: Warehouse) -> list[str]:
    """The Delta tables of the warehouse (the event log included, and a table stored at its
    declared `path`), not the pipeline's state. A private table is one of them: private means
    not published in the session catalog; the warehouse is the pipeline's own storage."""
    if not warehouse.root.is_dir():
        return []
    names = {p.name for p in warehouse.root.iterdir() if p.name != PIPELINE_DIR}
    return sorted(n for n in names | set(warehouse.located_tables()) if warehouse.has_table(n))


def require_table(warehouse: Warehouse, name: str) -> None:
    if not warehouse.root.is_dir():
        raise InspectError(f"no warehouse at {warehouse.root}; run `exactly-once run` first")
    if not warehouse.has_table(name):
        names = table_names(warehouse)
        raise InspectError(f"no table `{name}` in {warehouse.root}; "
                           + (f"its tables are {', '.join(names)}" if names
                              else "it has no tables yet; run `exactly-once run` first"))


def table(spark: SparkSession, warehouse: Warehouse, name: str) -> tuple[DataFrame, int, int]:
    """The table, its Delta version and its row count (from the Delta log when it says)."""
    require_table(warehouse, name)
    path = warehouse.table_path(name).resolve()
    return (spark.read.format("delta").load(str(path)), delta_log.latest_version(path),
            warehouse.row_count(spark, name))


def located(warehouse: Warehouse, scope: ReadScope, text: str) -> tuple[str, str]:
    """The table `text` names and where it is stored: the pipeline's own (in `warehouse`), or
    a table of the local catalog; one line when neither has it. No JVM is needed."""
    name = scope.dataset(text, set(table_names(warehouse)))
    if name is not None:
        return name, str(warehouse.table_path(name).resolve())
    table = scope.table(text)
    where = None if table is None else scope.catalog.location(table)
    if table is not None and where is not None:
        return str(table), where
    catalog = [str(t) for t in scope.catalog.tables()]
    if not warehouse.root.is_dir() and not catalog:
        raise InspectError(f"no warehouse at {warehouse.root}; run `exactly-once run` first")
    names = table_names(warehouse)
    raise InspectError(f"no table `{text}` in {warehouse.root} or the local catalog "
                       f"({scope.catalog.root}); "
                       + (f"its tables are {', '.join(names)}" if names
                          else "it has no tables yet; run `exactly-once run` first")
                       + (f"; the catalog's are {', '.join(catalog)}" if catalog else ""))


def rows(spark: SparkSession, where: str) -> tuple[DataFrame, int]:
    """The Delta table at `where` as of its latest version, and that version: read as the
    Parquet files the version names (`snapshot_files.read_latest`), about a tenth of what
    Delta's reader costs a table the session has not read at that version."""
    return read_latest(spark, where), delta_log.latest_version(where)
