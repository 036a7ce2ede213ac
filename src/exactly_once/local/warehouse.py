"""The local warehouse: one Delta table per directory, plus the pipeline's own state.

    <warehouse>/<table>/                                each dataset, readable by any Delta reader
    <warehouse>/event_log/                              the pipeline event log (see event_log.py)
    <warehouse>/_pipeline/checkpoints/<flow>/           streaming checkpoints (what was processed)
    <warehouse>/_pipeline/auto_cdc/<target>/            AUTO CDC key state (SCD1) or journal (SCD2)
    <warehouse>/_pipeline/auto_cdc/<target>__rejected/  AUTO CDC rows with a NULL key or sequence
    <warehouse>/_pipeline/lock                          the update lock (see lock.py)

This module is the one place that knows the layout, and the one place that decides what a Delta
table on disk is, so the runtime, the event log and the quality tools cannot disagree about it.
Spark is imported only where a method needs it: the quality tools import this module for
`is_delta_table` and the paths.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

PIPELINE_DIR = "_pipeline"
EVENT_LOG_DIR = "event_log"
DELTA_LOG_DIR = "_delta_log"


def is_delta_table(path: Path | str) -> bool:
    """Whether a Delta table lives at `path`: it has a transaction log."""
    return (Path(path) / DELTA_LOG_DIR).is_dir()


def delta_version(path: Path | str) -> int:
    """The table's latest commit version; -1 when it has none."""
    return max((int(p.stem) for p in (Path(path) / DELTA_LOG_DIR).glob("*.json")), default=-1)


def rows_written(path: Path | str, after_version: int) -> int:
    """Rows the commits after `after_version` wrote, from their `operationMetrics`: read from
    the log, so counting costs no Spark job."""
    total = 0
    for version in range(after_version + 1, delta_version(path) + 1):
        commit = Path(path) / DELTA_LOG_DIR / f"{version:020d}.json"
        # One action per "\n"-ended line; not splitlines(), which also splits at the U+2028 or
        # U+0085 a string in the file statistics may hold.
        for line in commit.read_text(encoding="utf-8").split("\n"):
            info = json.loads(line).get("commitInfo") if '"commitInfo"' in line else None
            if info:
                total += int(info.get("operationMetrics", {}).get("numOutputRows", 0))
    return total


@dataclass(frozen=True)
class AutoCdcTables:
    """The Delta tables one AUTO CDC target is written through, as absolute path strings (what
    Spark's readers and writers take)."""

    target: str  # the dataset itself
    state: str  # SCD1: each key's last applied sequence and tombstone; SCD2: the event journal
    rejected: str  # events with a NULL key or sequence, with the reason (never merged)


@dataclass(frozen=True)
class Warehouse:
    root: Path

    def table_path(self, name: str) -> Path:
        return self.root / name

    def checkpoint_path(self, flow: str) -> Path:
        return self.root / PIPELINE_DIR / "checkpoints" / flow

    def auto_cdc_state_path(self, target: str) -> Path:
        return self.root / PIPELINE_DIR / "auto_cdc" / target

    def auto_cdc_rejected_path(self, target: str) -> Path:
        """Next to the target's state, so a full refresh of the target finds both."""
        return self.root / PIPELINE_DIR / "auto_cdc" / f"{target}__rejected"

    def auto_cdc_tables(self, target: str) -> AutoCdcTables:
        return AutoCdcTables(target=str(self.table_path(target).resolve()),
                             state=str(self.auto_cdc_state_path(target).resolve()),
                             rejected=str(self.auto_cdc_rejected_path(target).resolve()))

    def event_log_path(self) -> Path:
        """Outside `_pipeline`: a full refresh keeps it, as Databricks keeps its event log."""
        return self.root / EVENT_LOG_DIR

    def lock_path(self) -> Path:
        return self.root / PIPELINE_DIR / "lock"

    def has_table(self, name: str) -> bool:
        return is_delta_table(self.table_path(name))

    def row_count(self, spark: SparkSession, name: str) -> int:
        return spark.read.format("delta").load(str(self.table_path(name).resolve())).count()

    def register(self, spark: SparkSession, name: str) -> None:
        """Make `name` resolvable in the session catalog (which forgets tables between runs)."""
        spark.sql(f"CREATE TABLE IF NOT EXISTS `{name}` USING DELTA "
                  f"LOCATION '{self.table_path(name).resolve()}'")

    def create_table(self, spark: SparkSession, name: str, schema: StructType,
                     properties: dict[str, str] | None = None, comment: str | None = None) -> None:
        """An empty Delta table, so readers downstream work before the first row arrives."""
        from delta.tables import DeltaTable

        builder = DeltaTable.createIfNotExists(spark).location(
            str(self.table_path(name).resolve())).addColumns(schema)
        for key, value in (properties or {}).items():
            builder = builder.property(key, value)
        if comment:
            builder = builder.comment(comment)
        builder.execute()
        self.register(spark, name)

    def reset_checkpoint(self, flow: str) -> None:
        """Forget what `flow` has read: its next run reads its sources from the start."""
        shutil.rmtree(self.checkpoint_path(flow), ignore_errors=True)

    def reset(self, spark: SparkSession, tables: dict[str, list[str]]) -> None:
        """Full refresh of `tables` (table -> the flows writing it): drop each table with the
        flows' checkpoints and its AUTO CDC state. Other tables and their state stay."""
        for name, flows in tables.items():
            spark.sql(f"DROP TABLE IF EXISTS `{name}`")
            for path in [self.table_path(name), self.auto_cdc_state_path(name),
                         self.auto_cdc_rejected_path(name),
                         *(self.checkpoint_path(flow) for flow in flows)]:
                shutil.rmtree(path, ignore_errors=True)
