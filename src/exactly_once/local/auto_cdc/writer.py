"""The one place that picks how an AUTO CDC flow is written: SCD type 1 or type 2.

Each SCD module offers the same three functions (`ScdType`); the runtime picks the module once
per flow and then only calls it, so the choice is never made (or tested) twice.
"""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from exactly_once.local.auto_cdc import scd1, scd2
from exactly_once.local.auto_cdc.changes import CdcBatchStats
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.storage.warehouse import AutoCdcTables


class ScdType(Protocol):
    """What an SCD module (`scd1`, `scd2`) provides; mypy checks the modules against it."""

    def target_schema(self, spec: AutoCdcSpec, source: DataFrame) -> StructType:
        """The target table's columns for this source."""
        ...

    def ensure_state_table(self, spark: SparkSession, spec: AutoCdcSpec, source: DataFrame,
                           state_path: str, evolve: bool = False) -> None:
        """Create the flow's state table, or check the existing one fits; `evolve`: the
        source's columns changed since the target's (`changes.schema_may_differ`), so the
        state table takes what it must of them (schema_evolution.py)."""
        ...

    def apply_batch(self, spark: SparkSession, batch: DataFrame, spec: AutoCdcSpec,
                    tables: AutoCdcTables, write: BatchWrite) -> CdcBatchStats:
        """Apply one micro-batch; `write` names it and its query for the commit markers."""
        ...


def scd_type_of(spec: AutoCdcSpec) -> ScdType:
    return scd2 if spec.stored_as_scd_type == 2 else scd1
