"""The Spark side of the local catalog (local/catalog/): one catalog plugin class
(`engine/jvm/local-catalog/`, built by `make setup` into `LOCAL_CATALOG_JAR`) registered under each
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

from exactly_once.local.engine import jvm_parts

PLUGIN_CLASS = "exactlyonce.catalog.LocalCatalog"
ROOT_KEY = "spark.exactlyonce.catalog.root"
CATALOG_KEY = "spark.sql.catalog.{}"
# Spark's own: the session catalog, and the name Databricks gives the legacy Hive metastore's.
SESSION_CATALOGS = ("spark_catalog",)


def class_path(jar: Path | None = None) -> list[str]:
    """The driver's launch class path entry of the plugin (catalogs live in the driver only):
    the clone's jar, else one made on first use (jvm_parts.py); none without javac."""
    found = jar or jvm_parts.catalog_jar()
    return [str(found)] if found is not None and found.is_file() else []


def register(spark: Any, root: Path, catalogs: Iterable[str]) -> None:
    """Point the session's catalogs `catalogs` at the local catalog under `root` (without the
    plugin, only the root: pipeline code's reads still resolve, Spark SQL's names do not)."""
    spark.conf.set(ROOT_KEY, str(root))
    if not class_path():
        return
    for name in catalogs:
        if name.lower() not in SESSION_CATALOGS:
            spark.conf.set(CATALOG_KEY.format(name), PLUGIN_CLASS)


def registered(spark: Any, name: str) -> bool:
    """Whether `name` is a catalog of the session: the session's own, or one registered."""
    return name.lower() in SESSION_CATALOGS or \
        spark.conf.get(CATALOG_KEY.format(name), None) is not None
