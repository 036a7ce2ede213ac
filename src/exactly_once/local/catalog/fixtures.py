"""Fixture files: rows in a file the bundle carries, read as a DataFrame.

Databricks' bundle templates ship a `fixtures/` folder and read it in their tests with
`load_fixture(filename)`: a `.json` file holds an array of row objects, a `.csv` file a header
and its rows. The local catalog reads the same files, named `<catalog>.<schema>.<table>.<ext>`,
as the tables a pipeline reads from outside (catalog.py); `.parquet` carries its own types.

Types come from the values, as Spark infers them: JSON numbers are BIGINT or DOUBLE, strings
that are timestamps TIMESTAMP, other strings STRING; a CSV column takes the narrowest type all
its values fit. Columns keep the order in which the file first names them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import FixtureError
from exactly_once.local.engine.sql_columns import identifier

SUFFIXES = (".json", ".csv", ".parquet")


def read_fixture(spark: SparkSession, path: Path) -> DataFrame:
    """The rows of fixture file `path` (`.json`: an array of row objects; `.csv` with a header;
    `.parquet`). A file that is not one of those is one line naming it."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise FixtureError(f"{path}: no such fixture file")
    if suffix == ".json":
        return _json_rows(spark, path)
    if suffix == ".csv":
        return (spark.read.option("header", True).option("inferSchema", True)
                .option("mode", "FAILFAST").csv(str(path)))
    if suffix == ".parquet":
        return spark.read.parquet(str(path))
    raise FixtureError(f"{path}: a fixture is .json (an array of row objects), .csv (with a "
                       f"header) or .parquet, not {suffix or 'a file without an extension'}")


def _json_rows(spark: SparkSession, path: Path) -> DataFrame:
    try:
        rows = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise FixtureError(f"{path}: not JSON: {err}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise FixtureError(f"{path}: a JSON fixture is an array of row objects, "
                           f'e.g. [{{"id": 1, "name": "a"}}]')
    order = list(dict.fromkeys(key for row in rows for key in row))
    if not order:
        raise FixtureError(f"{path}: no columns: a JSON fixture's rows name their columns")
    # Spark reads the array itself (no Python worker); its inference sorts columns by name.
    df = (spark.read.option("multiLine", True).option("inferTimestamp", True)
          .option("mode", "FAILFAST").json(str(path)))
    return df.selectExpr(*map(identifier, order))


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """`rows` as a JSON fixture file at `path`: a decimal as a number, a date or time as its
    ISO text, which the reader's inference makes a timestamp again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(rows), default=json_value))
    return path


def json_value(value: object) -> object:
    """A row's value JSON has no type for: a decimal as a number, a date or time as text."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"a fixture row's value is JSON, a decimal or a date, got {value!r}")


def digest(path: Path) -> str:
    """The file's content hash: what decides whether a table seeded from it is current."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
