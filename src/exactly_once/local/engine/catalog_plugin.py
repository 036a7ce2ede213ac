"""The Spark side of the local catalog (local/catalog/): one catalog plugin class
(`jvm/local-catalog/`, built by `make setup` into `LOCAL_CATALOG_JAR`) registered under each
catalog name, so that `catalog.schema.table` resolves in Spark SQL, `spark.table`, the catalog
API (`SHOW TABLES IN samples.nyctaxi`, `spark.catalog.listTables`) and `DESCRIBE`, in every
session the runtime builds.

The plugin reads its root directory from the session setting `ROOT_KEY` at every call, so one
warm session serves one catalog, then another (a test's, the next test's) with no restart.
Spark looks a catalog's class up by name when the name is first used, so names can be
registered while the session runs (`register`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from exactly_once.errors import MissingJarsError
from exactly_once.paths import LOCAL_CATALOG_JAR

PLUGIN_CLASS = "exactlyonce.catalog.LocalCatalog"
ROOT_KEY = "spark.exactlyonce.catalog.root"
CATALOG_KEY = "spark.sql.catalog.{}"
# Spark's own: the session catalog, and the name Databricks gives the legacy Hive metastore's.
SESSION_CATALOGS = ("spark_catalog",)


def class_path(jar: Path = LOCAL_CATALOG_JAR) -> list[str]:
    """The driver's launch class path entry of the plugin (catalogs live in the driver only)."""
    if not jar.is_file():
        raise MissingJarsError(f"no {jar.name} in {jar.parent}; run `make setup` first")
    return [str(jar)]


def register(spark: Any, root: Path, catalogs: Iterable[str]) -> None:
    """Point the session's catalogs `catalogs` at the local catalog under `root`."""
    spark.conf.set(ROOT_KEY, str(root))
    for name in catalogs:
        if name.lower() not in SESSION_CATALOGS:
            spark.conf.set(CATALOG_KEY.format(name), PLUGIN_CLASS)


def registered(spark: Any, name: str) -> bool:
    """Whether `name` is a catalog of the session: the session's own, or one registered."""
    return name.lower() in SESSION_CATALOGS or \
        spark.conf.get(CATALOG_KEY.format(name), None) is not None
