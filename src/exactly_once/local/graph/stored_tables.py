"""What a warehouse holds that analyzing the graph asks about (dry_run.py): a table's stored
schema, and the last snapshot version an AUTO CDC FROM SNAPSHOT flow applied to its target.

A snapshot function is asked for "the next snapshot after the latest version processed"
(https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes-from-snapshot),
None only before the first: an analysis that asks it, asks it what the next update will."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import StructType

from exactly_once.local.auto_cdc.from_snapshot import versions
from exactly_once.local.storage.schema_evolution import stored_schema
from exactly_once.local.storage.warehouse import Warehouse


@dataclass(frozen=True)
class StoredTables:
    warehouse: Warehouse

    def schema(self, table: str) -> StructType | None:
        """The table's stored schema; None when it has no table yet."""
        if not self.warehouse.has_table(table):
            return None
        return stored_schema(str(self.warehouse.table_path(table).resolve()))

    def snapshot_version(self, target: str) -> Any:
        """The last snapshot version applied to `target`; None before the first."""
        last = versions.latest(self.warehouse.auto_cdc_tables(target).state)
        return None if last is None else last[1]
