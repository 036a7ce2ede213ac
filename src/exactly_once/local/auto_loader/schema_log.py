"""The schema location of an Auto Loader stream: each schema version it has used, in order.

"Specifying a target directory for the option cloudFiles.schemaLocation enables schema
inference and evolution ... If you use Lakeflow Spark Declarative Pipelines, Databricks manages
schema location and other checkpoint information automatically"
(https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/schema). The
local runtime keeps it under the flow's checkpoint unless the read names one, so a full refresh,
which forgets the checkpoint, infers the schema anew.

`_schemas/<n>` holds version n: the schema and every file the schemas so far were inferred
over (a later update infers only over files none was). Each version is written once, atomically
(storage/files.py, a local directory or `s3a://`); a run killed before it wrote one infers again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql.types import StructType

from exactly_once.local.storage.files import StoragePath, location, write_atomic

DIRECTORY = "_schemas"


@dataclass(frozen=True)
class SchemaVersion:
    number: int
    schema: StructType
    files: frozenset[str]


def latest(schema_location: str | StoragePath) -> SchemaVersion | None:
    directory = location(str(schema_location)) / DIRECTORY
    try:
        numbers = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    except FileNotFoundError:
        return None
    if not numbers:
        return None
    record = json.loads((directory / str(numbers[-1])).read_text())
    return SchemaVersion(numbers[-1], StructType.fromJson(record["schema"]),
                         frozenset(record["files"]))


def write_next(schema_location: str | StoragePath, previous: SchemaVersion | None,
               schema: StructType, files: frozenset[str]) -> None:
    number = 0 if previous is None else previous.number + 1
    write_atomic(location(str(schema_location)) / DIRECTORY / str(number),
                 json.dumps({"schema": schema.jsonValue(), "files": sorted(files)}))
