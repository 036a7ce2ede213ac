"""`spark.readStream.format("cloudFiles")` in pipeline files, as they deploy to Databricks.

Classic Spark has no data source named cloudFiles (`DATA_SOURCE_NOT_FOUND`). While a flow's
query is built (`building`, by an update and by dry-run), pyspark's `DataStreamReader` keeps the
options and schema it is given, and a `load` of format cloudFiles becomes reader.auto_loader's
read: Spark's own file stream (why not a Python data source: reader.py). The read's schema
location defaults to the building flow's checkpoint, as pipelines manage it; an option the
runtime cannot honour is a `DeclarationError` naming the pipeline file, the dataset and the
option, which `dry-run` reports as `run` does, before anything is read.

The methods are replaced on pyspark's class while any thread builds a query (blocks nest, as
engine/pipeline_session.py does), and a reader without format cloudFiles behaves as pyspark's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import StructType

from exactly_once.errors import DeclarationError
from exactly_once.local.auto_loader.options import parse
from exactly_once.local.auto_loader.place import Placement, placement, set_placement
from exactly_once.local.auto_loader.reader import auto_loader

FORMAT = "cloudfiles"
_lock = threading.Lock()
_building = 0
# pyspark's own, taken once: a thread outside any build may still be inside a replacement when
# the last build ends, and must find them.
_originals: dict[str, Any] = {name: DataStreamReader.__dict__[name]
                              for name in ("format", "option", "options", "schema", "load")}


@contextmanager
def building(place: Placement) -> Iterator[None]:
    """The block builds `place.flow`'s query: cloudFiles reads are Auto Loader's."""
    outer = placement()
    set_placement(place)
    _install()
    try:
        yield
    finally:
        _uninstall()
        set_placement(outer)


def _state(reader: DataStreamReader) -> dict[str, Any]:
    state: dict[str, Any] | None = reader.__dict__.get("_auto_loader")
    if state is None:
        state = reader.__dict__["_auto_loader"] = {"cloud": False, "options": {}, "schema": None}
    return state


def _format(self: DataStreamReader, source: str) -> DataStreamReader:
    if source.lower() == FORMAT:
        _state(self)["cloud"] = True
        return self
    return _originals["format"](self, source)


def _option(self: DataStreamReader, key: str, value: Any) -> DataStreamReader:
    _state(self)["options"][key] = "" if value is None else (
        str(value).lower() if isinstance(value, bool) else str(value))
    return _originals["option"](self, key, value)


def _options(self: DataStreamReader, **options: Any) -> DataStreamReader:
    for key, value in options.items():
        _option(self, key, value)
    return self


def _schema(self: DataStreamReader, schema: StructType | str) -> DataStreamReader:
    _state(self)["schema"] = schema
    return _originals["schema"](self, schema)


def _load(self: DataStreamReader, path: str | None = None, format: str | None = None,
          schema: StructType | str | None = None, **options: Any) -> DataFrame:
    state = _state(self)
    if not (state["cloud"] or (format is not None and format.lower() == FORMAT)):
        return _originals["load"](self, path, format, schema, **options)
    place = placement()
    _options(self, **options)
    given = schema if schema is not None else state["schema"]
    try:
        if path is None:
            raise DeclarationError("Auto Loader needs a path: .load(path)")
        spark = self._spark
        user_schema = (spark.createDataFrame([], given).schema if isinstance(given, str)
                       else given)
        return auto_loader(spark, path, parse(state["options"], streaming=True,
                                              user_schema=user_schema is not None),
                           user_schema, place)
    except DeclarationError as err:
        if place is not None and err.dataset is None:
            raise DeclarationError(err.message, dataset=place.dataset,
                                   file=err.file or place.file) from None
        raise


def _install() -> None:
    global _building
    with _lock:
        _building += 1
        if _building > 1:
            return
        # Replacing these is the purpose here; each keeps pyspark's signature.
        DataStreamReader.format = _format  # type: ignore[method-assign]
        DataStreamReader.option = _option  # type: ignore[method-assign]
        DataStreamReader.options = _options  # type: ignore[method-assign]
        DataStreamReader.schema = _schema  # type: ignore[method-assign]
        DataStreamReader.load = _load  # type: ignore[method-assign]


def _uninstall() -> None:
    global _building
    with _lock:
        _building -= 1
        if _building > 0:
            return
        for name, original in _originals.items():
            setattr(DataStreamReader, name, original)
