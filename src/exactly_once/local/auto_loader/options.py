"""The options of an Auto Loader read, as Databricks documents them, parsed once.

https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/options: the
`cloudFiles.*` options are Auto Loader's, every other option is the file format's (Spark's
JSON, CSV, Parquet or text options, and the generic `pathGlobFilter`, `recursiveFileLookup`).
`read_files` (https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files)
takes the same options without the `cloudFiles.` prefix, and infers column types by default.

An option the runtime cannot honour (file notifications, backfills, cleaning the source...) is
refused with a `DeclarationError` naming it, never accepted and ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from exactly_once.errors import DeclarationError

PREFIX = "cloudfiles."
FORMATS = ("json", "csv", "parquet", "text")
MODES = ("addNewColumns", "rescue", "none", "failOnNewColumns")
RESCUED = "_rescued_data"
# Auto Loader's own options this runtime honours (lower case, without the prefix).
SUPPORTED = {"format", "schemalocation", "infercolumntypes", "schemahints",
             "schemaevolutionmode", "maxfilespertrigger", "maxbytespertrigger",
             "includeexistingfiles", "validateoptions"}
# Format options that would make Spark's file stream read differently from Auto Loader.
REFUSED_FORMAT_OPTIONS = {"modifiedafter", "modifiedbefore", "multiline", "encoding", "charset"}
DEFAULT_MAX_FILES = 1000  # cloudFiles.maxFilesPerTrigger's default
_BYTES = re.compile(r"^\s*(\d+)\s*([bkmgt]?)b?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class AutoLoaderOptions:
    format: str
    schema_location: str | None = None
    infer_column_types: bool = False
    schema_hints: str | None = None
    evolution_mode: str | None = None  # None: addNewColumns if the schema is inferred, else none
    max_files: int | None = None
    max_bytes: int | None = None
    include_existing_files: bool = True
    rescued_column: str | None = None  # the format option `rescuedDataColumn`
    format_options: dict[str, str] = field(default_factory=dict)

    def mode(self, inferred: bool) -> str:
        return self.evolution_mode or ("addNewColumns" if inferred else "none")


def recursive_by_default(options: Mapping[str, str]) -> dict[str, str]:
    """`options` looking under subdirectories too, as Databricks' read_files and Auto Loader
    do ("read_files discovers all files under the provided directory recursively unless a glob
    is provided"; under a glob, what is under each directory it matches: the page's strict
    globber table, https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files).
    Spark's file source reads a directory's own files (and Hive-style `key=value` directories)
    unless `recursiveFileLookup` is true; given, it is kept."""
    if any(k.lower() == "recursivefilelookup" for k in options):
        return dict(options)
    return {**options, "recursiveFileLookup": "true"}


def unsupported(name: str, why: str = "") -> DeclarationError:
    return DeclarationError(f"Auto Loader option {name} is not supported by the local runtime"
                            + (f" ({why})" if why else ""))


def _flag(name: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise DeclarationError(f"Auto Loader option {name} must be true or false, got {value!r}")
    return value.strip().lower() == "true"


def _count(name: str, value: str) -> int:
    if not value.strip().isdigit() or int(value) < 1:
        raise DeclarationError(f"Auto Loader option {name} must be a positive number, "
                               f"got {value!r}")
    return int(value)


def byte_size(name: str, value: str) -> int:
    """`10g`, `512m`, `1024` (bytes) as bytes, as Databricks reads a byte string."""
    match = _BYTES.match(value)
    if match is None or int(match[1]) < 1:
        raise DeclarationError(f"Auto Loader option {name} must be a byte size such as 10g, "
                               f"got {value!r}")
    return int(match[1]) * 1024 ** "bkmgt".index((match[2] or "b").lower())


def parse(options: Mapping[str, str], *, streaming: bool, read_files: bool = False,
          user_schema: bool = False) -> AutoLoaderOptions:
    """`options` as an Auto Loader read (`read_files`: the prefix is optional and column types
    are inferred unless told otherwise)."""
    own: dict[str, tuple[str, str]] = {}  # lower-case name -> (name as written, value)
    rest: dict[str, str] = {}
    for key, value in options.items():
        lower = key.lower()
        if lower.startswith(PREFIX):
            own[lower.removeprefix(PREFIX)] = (key, str(value))
        elif read_files and lower in SUPPORTED | {"useNotifications".lower()}:
            own[lower] = (key, str(value))
        else:
            rest[key] = str(value)
    for lower, (key, _) in own.items():
        if lower not in SUPPORTED:
            raise unsupported(key)
    for key, value in rest.items():
        if key.lower() in REFUSED_FORMAT_OPTIONS and not (
                key.lower() in ("encoding", "charset") and value.lower().replace("-", "") == "utf8"
                or key.lower() == "multiline" and value.lower() == "false"):
            raise unsupported(key, "Spark's file stream source reads JSON a line at a time, in "
                              "UTF-8, and cannot filter by modification time")

    def get(name: str) -> tuple[str, str] | None:
        return own.get(name.lower())

    fmt = get("format")
    if fmt is None:
        raise DeclarationError("Auto Loader needs cloudFiles.format (json, csv, parquet or "
                               "text)")
    if fmt[1].lower() not in FORMATS:
        raise unsupported(f"{fmt[0]}={fmt[1]}", f"formats: {', '.join(FORMATS)}")
    values = {name: value for name, (_, value) in own.items()}
    mode = values.get("schemaevolutionmode")
    if mode is not None and mode not in MODES:
        raise DeclarationError(f"cloudFiles.schemaEvolutionMode must be one of "
                               f"{', '.join(MODES)}, got {mode!r}")
    if mode == "addNewColumns" and user_schema:
        raise DeclarationError("cloudFiles.schemaEvolutionMode addNewColumns needs an inferred "
                               "schema; with .schema(...) use none, rescue or failOnNewColumns")
    if mode == "rescue" and fmt[1].lower() in ("parquet", "text"):
        raise unsupported(f"cloudFiles.schemaEvolutionMode=rescue with {fmt[1]} files",
                          "rescue is done for json and csv")
    max_files = values.get("maxfilespertrigger")
    max_bytes = values.get("maxbytespertrigger")
    if max_files is not None and max_bytes is not None:
        raise unsupported("cloudFiles.maxFilesPerTrigger with cloudFiles.maxBytesPerTrigger",
                          "Spark's file stream takes one of the two")
    if not streaming:
        for name in ("maxfilespertrigger", "maxbytespertrigger", "includeexistingfiles",
                     "schemaevolutionmode", "schemalocation"):
            if name in own:
                raise DeclarationError(f"{own[name][0]} applies to a stream only")
    rescued = next((v for k, v in rest.items() if k.lower() == "rescueddatacolumn"), None)
    rest = {k: v for k, v in rest.items() if k.lower() != "rescueddatacolumn"}
    infer = values.get("inferColumnTypes".lower())
    return AutoLoaderOptions(
        format=fmt[1].lower(),
        schema_location=values.get("schemalocation"),
        infer_column_types=_flag("cloudFiles.inferColumnTypes", infer) if infer is not None
        else read_files,
        schema_hints=values.get("schemahints"),
        evolution_mode=mode,
        max_files=_count("cloudFiles.maxFilesPerTrigger", max_files) if max_files else None,
        max_bytes=byte_size("cloudFiles.maxBytesPerTrigger", max_bytes) if max_bytes else None,
        include_existing_files=_flag("cloudFiles.includeExistingFiles",
                                     values.get("includeexistingfiles", "true")),
        rescued_column=rescued,
        format_options=rest)
