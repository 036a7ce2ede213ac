"""The one place that picks how an AUTO CDC flow is written: SCD type 1 or type 2.

The runtime asks for a writer once per flow and then only calls it, so the choice is never
made (or tested) twice.
"""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from exactly_once.local.auto_cdc.changes import CdcBatchStats
from exactly_once.local.auto_cdc.scd1 import Scd1Writer
from exactly_once.local.auto_cdc.scd2 import Scd2Writer
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.warehouse import AutoCdcTables


class AutoCdcWriter(Protocol):
    def target_schema(self, source: DataFrame) -> StructType:
        """The target table's columns for this source."""
        ...

    def ensure_state_table(self, spark: SparkSession, source: DataFrame) -> None:
        """Create the flow's state table, or check the existing one fits."""
        ...

    def apply_batch(self, spark: SparkSession, batch: DataFrame, batch_id: int, *,
                    query_id: str) -> CdcBatchStats:
        """Apply one micro-batch; `query_id` identifies the checkpoint in the commit markers."""
        ...


def writer_for(spec: AutoCdcSpec, tables: AutoCdcTables) -> AutoCdcWriter:
    if spec.stored_as_scd_type == 2:
        return Scd2Writer(spec, tables)
    return Scd1Writer(spec, tables)
