"""The local warehouse: one Delta table per directory, plus the pipeline's own state.

    <warehouse>/<table>/                      each dataset, readable by any Delta reader
    <warehouse>/_pipeline/checkpoints/<flow>/ streaming checkpoints (what was already processed)
    <warehouse>/_pipeline/auto_cdc/<target>/  AUTO CDC key state: newest sequence and tombstones
    <warehouse>/_pipeline/lock                the update lock (see lock.py)
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

PIPELINE_DIR = "_pipeline"


def delta_version(path: Path | str) -> int:
    """The table's latest commit version; -1 when it has none."""
    return max((int(p.stem) for p in (Path(path) / "_delta_log").glob("*.json")), default=-1)


def rows_written(path: Path | str, after_version: int) -> int:
    """Rows the commits after `after_version` wrote, from their `operationMetrics`: read from
    the log, so counting costs no Spark job."""
    total = 0
    for version in range(after_version + 1, delta_version(path) + 1):
        commit = Path(path) / "_delta_log" / f"{version:020d}.json"
        # One action per "\n"-ended line; not splitlines(), which also splits at the U+2028 or
        # U+0085 a string in the file statistics may hold.
        for line in commit.read_text(encoding="utf-8").split("\n"):
            info = json.loads(line).get("commitInfo") if '"commitInfo"' in line else None
            if info:
                total += int(info.get("operationMetrics", {}).get("numOutputRows", 0))
    return total


@dataclass(frozen=True)
class Warehouse:
    root: Path

    def table_path(self, name: str) -> Path:
        return self.root / name

    def checkpoint_path(self, flow: str) -> Path:
        return self.root / PIPELINE_DIR / "checkpoints" / flow

    def auto_cdc_state_path(self, target: str) -> Path:
        return self.root / PIPELINE_DIR / "auto_cdc" / target

    @staticmethod
    def is_delta(path: Path) -> bool:
        return (path / "_delta_log").is_dir()

    def has_table(self, name: str) -> bool:
        return self.is_delta(self.table_path(name))

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

    def lock_path(self) -> Path:
        return self.root / PIPELINE_DIR / "lock"

    def reset(self, spark: SparkSession, tables: dict[str, list[str]]) -> None:
        """Full refresh of `tables` (table -> the flows writing it): drop each table with the
        flows' checkpoints and its AUTO CDC state. Other tables and their state stay."""
        for name, flows in tables.items():
            spark.sql(f"DROP TABLE IF EXISTS `{name}`")
            state = self.auto_cdc_state_path(name)
            for path in [self.table_path(name), state, state.with_name(f"{state.name}__rejected"),
                         *(self.checkpoint_path(flow) for flow in flows)]:
                shutil.rmtree(path, ignore_errors=True)
