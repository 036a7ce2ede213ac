"""Reference tables that arrive as whole snapshots, one file a day, not through Kafka
(`exports:` in conf/), read by AUTO CDC FROM SNAPSHOT flows."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExportSettings:
    """A reference table that arrives as whole snapshots, one file a day, not through Kafka
    (`exports.<name>`): read by an AUTO CDC FROM SNAPSHOT flow, versioned by the file's date."""

    name: str
    path: str  # the directory of `<name>_<YYYY-MM-DD>.csv` files (on Databricks, a Volume)
    key: str
    schema: str  # Spark DDL of the file's columns, in order
    track_history: tuple[str, ...] = ()  # SCD2: the columns whose change opens a new version
