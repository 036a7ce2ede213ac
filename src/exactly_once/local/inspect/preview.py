"""What a warehouse holds, for `exactly-once show`: its tables, and a table's first rows."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import InspectError
from exactly_once.local.storage import delta_log
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
