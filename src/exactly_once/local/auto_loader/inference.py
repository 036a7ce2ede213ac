"""What an Auto Loader read sees: its files, and a schema inferred over them.

https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/schema: "For
formats that don't encode data types (JSON, CSV, and XML), Auto Loader infers all columns as
strings (including nested fields in JSON files)" unless `cloudFiles.inferColumnTypes`;
Parquet's types are its own; `cloudFiles.schemaHints` set the types of the columns they name
(and add a column no file has yet); a schema evolves by new columns only, existing columns keep
their types.

Files are listed as Spark's file stream lists them (the same source, options and hidden-file
rule: `inputFiles` of a batch read over the path), so inference sees what the stream reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from exactly_once.errors import DeclarationError, first_line
from exactly_once.local.auto_loader.options import AutoLoaderOptions

# Options of the listing itself; the rest are the parser's.
LISTING_OPTIONS = {"pathglobfilter", "recursivefilelookup", "ignoremissingfiles"}
TEXT = StructType([StructField("value", StringType())])


def normalized(path: str) -> str:
    """A file's path as `_metadata.file_path` spells it (`file:/x`, not `file:///x`)."""
    return re.sub(r"^file:/+", "file:/", path)


def listing_options(options: AutoLoaderOptions) -> dict[str, str]:
    return {k: v for k, v in options.format_options.items() if k.lower() in LISTING_OPTIONS}


def parser_options(options: AutoLoaderOptions) -> dict[str, str]:
    return {k: v for k, v in options.format_options.items() if k.lower() not in LISTING_OPTIONS}


def listed_files(spark: SparkSession, path: str, options: AutoLoaderOptions) -> list[str]:
    """The files under `path` the read takes (pathGlobFilter, hidden files left out)."""
    reader = spark.read.format("text").options(**listing_options(options))
    try:
        return sorted(normalized(f) for f in reader.load(path).inputFiles())
    except Exception as err:  # noqa: BLE001 - a path not there, say: one line naming it
        raise DeclarationError(f"Auto Loader cannot list {path}: {first_line(err)}") from None


def infer(spark: SparkSession, files: Sequence[str], options: AutoLoaderOptions) -> StructType:
    """The schema of `files` in the read's format, before hints."""
    if options.format == "text":
        return TEXT
    parse = parser_options(options)
    try:
        if options.format == "json":
            schema = spark.read.options(**parse).option(
                "primitivesAsString", str(not options.infer_column_types).lower()).json(
                list(files)).schema
        elif options.format == "csv":
            schema = spark.read.options(**parse).option(
                "inferSchema", str(options.infer_column_types).lower()).csv(list(files)).schema
        else:
            schema = spark.read.option("mergeSchema", "true").parquet(*files).schema
    except Exception as err:  # noqa: BLE001 - Spark's reason, one line
        raise DeclarationError(f"Auto Loader could not infer the schema of {len(files)} "
                               f"file(s): {first_line(err)}") from None
    return StructType([f for f in schema.fields if f.name != "_corrupt_record"])


def with_hints(spark: SparkSession, schema: StructType, hints: str | None) -> StructType:
    """`schema` with each hinted column's type; a hinted column no file has is added."""
    if not hints:
        return schema
    try:
        hinted = spark.createDataFrame([], hints).schema
    except Exception as err:  # noqa: BLE001 - one line naming the option
        raise DeclarationError(f"cloudFiles.schemaHints {hints!r}: {first_line(err)} (the "
                               "local runtime takes top-level columns: `name TYPE, ...`)") \
            from None
    types = {f.name.lower(): f for f in hinted.fields}
    fields = [StructField(f.name, types.pop(f.name.lower()).dataType, True)
              if f.name.lower() in types else f for f in schema.fields]
    return StructType(fields + [StructField(f.name, f.dataType, True) for f in hinted.fields
                                if f.name.lower() in types])


def new_columns(schema: StructType, seen: StructType) -> list[StructField]:
    """The columns of `seen` that `schema` lacks (names compared without case)."""
    known = {f.name.lower() for f in schema.fields}
    return [f for f in seen.fields if f.name.lower() not in known]
