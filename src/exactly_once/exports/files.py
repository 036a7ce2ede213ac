"""Daily export files: `<name>_<YYYY-MM-DD>.csv` in one directory, the date their version.

The pipeline imports this module (pipelines/players_history.py), on Databricks too: a directory
is a local path or a Unity Catalog Volume (`/Volumes/...`, which Databricks serves as a local
path), listed with `os`. A file whose name does not match is not an export (a file still being
written under a temporary name, a README) and is never read; a name that matches but whose date
does not exist is an error, not a file silently skipped.
"""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the generator and the CLI import this module without Spark
    from pyspark.sql import DataFrame, SparkSession

_EXPORT = re.compile(r"^(?P<name>.+)_(?P<day>\d{4}-\d{2}-\d{2})\.csv$")


def export_file_name(name: str, day: date) -> str:
    return f"{name}_{day.isoformat()}.csv"


def dated_exports(directory: str | Path, name: str) -> list[tuple[date, Path]]:
    """The exports of `name` in `directory`, oldest first."""
    found = []
    for entry in sorted(os.listdir(directory)):
        match = _EXPORT.match(entry)
        if match is None or match["name"] != name:
            continue
        try:
            day = date.fromisoformat(match["day"])
        except ValueError:
            raise ValueError(f"{Path(directory) / entry}: {match['day']} is not a date; an "
                             f"export is named {name}_<YYYY-MM-DD>.csv") from None
        found.append((day, Path(directory) / entry))
    return found


def next_export(directory: str | Path, name: str,
                latest: date | None) -> tuple[date, Path] | None:
    """The first export of `name` dated after `latest` (any, when None); None if none is."""
    return next(((day, path) for day, path in dated_exports(directory, name)
                 if latest is None or day > latest), None)


def read_export(spark: SparkSession, path: str | Path, schema: str) -> DataFrame:
    """One export as its declared columns: the header must name them, in order, and a value
    that does not parse as its type fails the read instead of becoming NULL."""
    return spark.read.csv(str(path), schema=schema, header=True, enforceSchema=False,
                          mode="FAILFAST")
