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
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import FixtureError

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
    lines = spark.sparkContext.parallelize([json.dumps(r) for r in rows], 1)
    df = spark.read.option("inferTimestamp", True).option("mode", "FAILFAST").json(lines)
    return df.select(*[f"`{c}`" for c in order])


def digest(path: Path) -> str:
    """The file's content hash: what decides whether a table seeded from it is current."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
