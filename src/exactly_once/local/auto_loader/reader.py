"""The DataFrame of an Auto Loader read or of `read_files`: Spark's own file source underneath.

Why Spark's file stream source, and not a Python data source named "cloudFiles": exactly-once
is the checkpoint's job. Spark's file source records each micro-batch's files in the query's
checkpoint (its `sources/` log) before the batch runs, so a query restarted after a crash runs
the same files again and a file is never listed twice, across updates too; it has
`maxFilesPerTrigger`, `maxBytesPerTrigger`, `pathGlobFilter` and the `_metadata` column
(https://docs.databricks.com/aws/en/ingestion/file-metadata-column). A Python
`DataSourceStreamReader` would have had to keep its own file log next to Spark's offsets, and
read Parquet in Python. What Auto Loader adds on top is done here, around that source:

- the schema, inferred over the files and kept at the schema location (inference.py,
  schema_log.py); an update infers only over files no earlier one did, and by
  `cloudFiles.schemaEvolutionMode` (https://docs.databricks.com/aws/en/ingestion/cloud-object-
  storage/auto-loader/schema): `addNewColumns` records the new columns and stops the stream
  once with Databricks' UNKNOWN_FIELD_EXCEPTION (`SchemaEvolvedError`), the next update reads
  them; `failOnNewColumns` stops without evolving; `rescue` and `none` never evolve;
- `_rescued_data`, added when the schema is inferred (or named by `rescuedDataColumn`): as a
  JSON object, the fields of a record that do not fit the schema (a value not of its column's
  type; with a rescue column, a field the schema lacks), with `_file_path`. JSON is read as
  lines (the text source) and parsed with `from_json`, CSV as strings and cast with `try_cast`,
  so what does not fit is seen rather than turned into NULL;
- `cloudFiles.includeExistingFiles=false`: the files there when the stream first starts are
  recorded once (under its checkpoint) and their rows left out; a file is still listed once;
- `maxFilesPerTrigger` 1000 by default, as Auto Loader's; Spark's `maxFileAge` set beyond any
  file's age, since Auto Loader reads a new file whatever its modification time (Spark's
  default of 7 days skips a file copied in with an old one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from exactly_once.errors import DeclarationError, SchemaEvolvedError
from exactly_once.local.auto_loader import inference, schema_log
from exactly_once.local.auto_loader.options import (
    DEFAULT_MAX_FILES,
    RESCUED,
    AutoLoaderOptions,
    parse,
    recursive_by_default,
)
from exactly_once.local.auto_loader.place import Placement, placement
from exactly_once.local.catalog.catalog import local_path
from exactly_once.local.storage.files import StoragePath, location, write_atomic

NO_MAX_AGE = "3650000d"  # Spark's maxFileAge: no file is too old to be new
EXISTING = "existing_files.json"
EXTENSIONS = {"json": "json", "jsonl": "json", "csv": "csv", "parquet": "parquet",
              "txt": "text"}


def read_files(spark: SparkSession, path: str, options: Mapping[str, str],
               streaming: bool) -> DataFrame:
    """SQL's `read_files(path, key => value, ...)`: a batch read of the files (column types
    inferred unless `inferColumnTypes` is false, `_rescued_data` added), or, for
    `STREAM read_files(...)`, Auto Loader's stream with the same options (the `cloudFiles.`
    prefix optional). Inside a flow's query being built (hook.building) the schema location
    defaults to the flow's, as for `format("cloudFiles")`.
    https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files"""
    path = local_path(spark, path)  # a /Volumes/... path, in the local catalog
    if not any(key.lower() in ("format", "cloudfiles.format") for key in options):
        options = {**options, "format": _detected_format(spark, path, options)}
    return auto_loader(spark, path, parse(options, streaming=streaming, read_files=True),
                       None, placement(), streaming)


def _detected_format(spark: SparkSession, path: str, options: Mapping[str, str]) -> str:
    """read_files' format from the files' extensions, when every file has the same one."""
    listing = {k: v for k, v in recursive_by_default(options).items()
               if k.lower() in inference.LISTING_OPTIONS}
    files = spark.read.format("text").options(**listing).load(path).inputFiles()
    found = {EXTENSIONS.get(f.rsplit(".", 1)[-1].lower()) for f in files}
    if len(found) != 1 or None in found:
        raise DeclarationError(f"read_files cannot tell the format of the files in {path}: "
                               "give format => 'json' (csv, parquet, text)")
    return str(found.pop())


def auto_loader(spark: SparkSession, path: str, options: AutoLoaderOptions,
                user_schema: StructType | None, place: Placement | None,
                streaming: bool = True) -> DataFrame:
    """The read of `path` as Auto Loader (streaming) or read_files (batch) reads it; a
    `/Volumes/...` path (the data's, or the schema location's) in the local catalog."""
    path = local_path(spark, path)
    place = place or Placement()
    options = replace(options, format_options=recursive_by_default(options.format_options))
    directory = place.next_directory()
    schema_location = (local_path(spark, options.schema_location) if options.schema_location
                       else (str(directory / "schema") if directory is not None else None))
    inferred = user_schema is None and options.format != "text"
    mode = options.mode(inferred)
    if streaming and inferred and schema_location is None and place.flow is None:
        raise DeclarationError("Auto Loader infers the schema: give cloudFiles.schemaLocation "
                               "(a flow of the pipeline keeps it under its checkpoint)")
    if options.format == "text":
        schema = user_schema or inference.TEXT
    elif user_schema is not None:
        schema = user_schema
    else:
        try:
            schema = _schema(spark, path, options, schema_location if streaming else None, mode,
                             place.persist)
        except SchemaEvolvedError as stop:  # named as every failed flow is (streams.flow_error)
            if place.flow is None:
                raise
            raise SchemaEvolvedError(f"flow `{place.flow}` failed: {stop}") from None
    rescued = options.rescued_column or (
        RESCUED if inferred and (mode != "none" or not streaming) else None)
    if rescued is not None and options.format in ("parquet", "text") and not inferred:
        rescued = None
    df = _source(spark, path, options, schema, streaming)
    if streaming and not options.include_existing_files and directory is not None:
        existing = _existing_files(spark, path, options, directory, place.persist)
        if existing:
            df = df.where(~F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "file:/")
                          .isin(existing))
    return _typed(df, options, schema, rescued)


def _schema(spark: SparkSession, path: str, options: AutoLoaderOptions,
            schema_location: str | None, mode: str, persist: bool) -> StructType:
    """The read's schema: the schema location's, evolved by files no version was inferred over;
    a batch read's (no location) inferred over every file."""
    files = inference.listed_files(spark, path, options)
    latest = schema_log.latest(schema_location) if schema_location else None
    new = [f for f in files if latest is None or f not in latest.files]
    if latest is None:
        if not new:
            raise DeclarationError(f"[CF_EMPTY_DIR_FOR_SCHEMA_INFERENCE] Auto Loader cannot "
                                   f"infer a schema: no files in {path} yet")
        schema = inference.with_hints(spark, inference.infer(spark, new, options),
                                      options.schema_hints)
        if persist and schema_location:
            schema_log.write_next(schema_location, None, schema, frozenset(new))
        return schema
    if not new:
        return latest.schema
    seen = inference.with_hints(spark, inference.infer(spark, new, options),
                                options.schema_hints)
    added = inference.new_columns(latest.schema, seen)
    if not persist:  # a dry run: analyzed as the next update would read, nothing recorded
        return StructType(latest.schema.fields + added) if mode == "addNewColumns" \
            else latest.schema
    if added and mode in ("addNewColumns", "failOnNewColumns"):
        names = ", ".join(f.name for f in added)
        files_with = [f for f in new if inference.new_columns(
            latest.schema, inference.infer(spark, [f], options))]
        retry = mode == "addNewColumns"
        if retry:
            schema_log.write_next(schema_location or "", latest,
                                  StructType(latest.schema.fields + added),
                                  latest.files | frozenset(new))
        raise SchemaEvolvedError(
            f"[UNKNOWN_FIELD_EXCEPTION.NEW_FIELDS_IN_FILE] Encountered unknown fields during "
            f"parsing: [{names}], which can be fixed by an automatic retry: "
            f"{str(retry).lower()}. Unknown fields inside file path: "
            f"{files_with[0] if files_with else new[0]}"
            + ("; the schema location has them now: the next update reads them" if retry
               else "; the stream does not go on until the schema is changed or the file "
                    "removed (cloudFiles.schemaEvolutionMode failOnNewColumns)"))
    schema_log.write_next(schema_location or "", latest, latest.schema,
                          latest.files | frozenset(new))
    return latest.schema


def _source(spark: SparkSession, path: str, options: AutoLoaderOptions, schema: StructType,
            streaming: bool) -> DataFrame:
    """Spark's file source over `path`: JSON as lines of text, CSV as strings."""
    source_options = inference.listing_options(options)
    if options.format == "csv":
        fmt = "csv"
        source_options = options.format_options  # the CSV parser's options are the source's
        source_schema = StructType([StructField(f.name, StringType()) for f in schema.fields])
    elif options.format == "json":
        fmt, source_schema = "text", inference.TEXT
    elif options.format == "text":
        fmt, source_schema = "text", inference.TEXT
        source_options = options.format_options
    else:
        fmt, source_schema = "parquet", schema
        source_options = options.format_options
    if streaming:
        reader = spark.readStream.format(fmt).schema(source_schema).options(**source_options)
        reader = reader.option("maxFileAge", NO_MAX_AGE)
        if options.max_bytes is not None:
            reader = reader.option("maxBytesPerTrigger", str(options.max_bytes))
        else:
            reader = reader.option("maxFilesPerTrigger",
                                   str(options.max_files or DEFAULT_MAX_FILES))
        return reader.load(path)
    return spark.read.format(fmt).schema(source_schema).options(**source_options).load(path)


def _typed(df: DataFrame, options: AutoLoaderOptions, schema: StructType,
           rescued: str | None) -> DataFrame:
    """The source's rows as `schema`'s columns (and the rescue column)."""
    if options.format in ("parquet", "text"):
        return df.select(*[F.col(f.name) for f in schema.fields],
                         *([F.lit(None).cast("string").alias(rescued)] if rescued else []))
    names = [f.name for f in schema.fields]
    if options.format == "json":
        lines = df.where(F.trim("value") != "")
        parsed = F.from_json("value", schema, inference.parser_options(options))
        # Each field's JSON as written (a VARIANT), so a rescued `true` stays a boolean.
        raw = F.from_json("value", "map<string,variant>", inference.parser_options(options))
        typed = lines.select(parsed.alias("_typed"), raw.alias("_raw"),
                             F.col("_metadata.file_path").alias("_path"))
        value = {n: F.col("_typed").getField(n) for n in names}
        text = {n: F.col("_raw").getItem(n) for n in names}
        unknown = F.map_filter("_raw", lambda k, v: ~F.lower(k).isin(
            [n.lower() for n in names]))
    else:
        typed = df.select(*names, F.col("_metadata.file_path").alias("_path"))
        value = {f.name: F.col(f.name) if isinstance(f.dataType, StringType)
                 else F.expr(f"try_cast(`{f.name}` AS {f.dataType.simpleString()})")
                 for f in schema.fields}
        text = {n: F.col(n).cast("variant") for n in names}
        unknown = F.create_map().cast("map<string,variant>")
    columns = [value[n].alias(n) for n in names]
    if rescued is not None:
        columns.append(_rescued(value, text, unknown).alias(rescued))
    return typed.select(*columns)


def _rescued(value: dict[str, Column], text: dict[str, Column], unknown: Column) -> Column:
    """The fields that do not fit, as a JSON object with `_file_path`; NULL when all fit."""
    def misfit(n: str) -> Column:  # a value given (not JSON's null) that its type lost
        given = text[n].isNotNull() & ~F.is_variant_null(text[n])
        return F.when(given & value[n].isNull(),
                      F.struct(F.lit(n).alias("key"), text[n].alias("value")))

    misfits = F.filter(F.array(*[misfit(n) for n in value]), lambda e: e.isNotNull())
    fields = F.map_concat(unknown, F.map_from_entries(misfits).cast("map<string,variant>"))
    return F.when(F.size(fields) > 0, F.to_json(F.map_concat(
        fields, F.create_map(F.lit("_file_path"), F.col("_path").cast("variant")))))


def _existing_files(spark: SparkSession, path: str, options: AutoLoaderOptions,
                    directory: StoragePath, persist: bool) -> list[str]:
    """The files there when the stream first started (includeExistingFiles=false): recorded
    when its checkpoint has logged no batch, then read back."""
    record = directory / EXISTING
    if record.is_file():
        return list(json.loads(record.read_text()))
    checkpoint = directory.parent.parent
    started = any(p.name.isdigit() for p in _children(checkpoint / "offsets"))
    if started or not persist:
        return []
    files = inference.listed_files(spark, path, options)
    write_atomic(record, json.dumps(files))
    return files


def _children(path: StoragePath) -> list[StoragePath]:
    try:
        return list(location(str(path)).iterdir())
    except FileNotFoundError:
        return []
