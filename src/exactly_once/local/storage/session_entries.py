"""The Spark session catalog's entries of a warehouse's tables (warehouse.py's `register`):
what an entry of a dataset's name is, where it points, and moving it to another location.

A dataset's name (catalog/names.py's `dataset_key`) is one part in the pipeline's schema, two
in another schema of its catalog; the session catalog holds both, and none of another catalog's
(the local catalog publishes those). No public API says where an entry points or moves one,
so these read and change the catalog's own metadata through the session's JVM objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exactly_once.errors import GraphError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def identifier(spark: SparkSession, name: str) -> str | None:
    """A dataset's name (`catalog/names.py`'s `dataset_key`: `name`, `schema.name` or
    `catalog.schema.name`) as the session catalog's table: `` `name` `` in its current schema,
    `` `schema`.`name` `` in another; None for another catalog's, which only the local catalog
    holds. Spark's parser splits it, as it splits the name when a query reads it."""
    if "." not in name and "`" not in name:  # one part: no round trip to the JVM
        return f"`{name}`"
    try:
        seq = spark._jsparkSession.sessionState().sqlParser().parseMultipartIdentifier(name)
        parts = [str(seq.apply(i)) for i in range(seq.length())]
    except Exception:  # noqa: BLE001 - not a name of parts (a ParseException): one part
        parts = [name]
    if len(parts) > 2:
        return None
    return ".".join(f"`{p.replace('`', '``')}`" for p in parts)


def in_its_schema(spark: SparkSession, table: str) -> str:
    """`table` (`identifier`'s), its schema made first when it names one: an update
    makes the schemas its datasets name, as Databricks' does."""
    if table.count("`.`") == 1:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {table.rsplit('`.`', 1)[0]}`")
    return table


@dataclass(frozen=True)
class CatalogEntry:
    """The session catalog's entry of a name: the catalog, the name as it parsed, the entry
    (py4j objects), and where it points."""

    catalog: Any
    identifier: Any
    table: Any
    location: str  # a path, `file:` dropped: as `where` is written


def registered_entry(spark: SparkSession, name: str) -> CatalogEntry | None:
    """The session catalog's entry of `name` (`identifier`'s; None if unknown), read
    from the catalog's own metadata: no query, no Delta snapshot (a tenth of the cost of
    CREATE TABLE IF NOT EXISTS).
    A managed table of that name is the user's own: refused, since dropping it deletes it."""
    state = spark._jsparkSession.sessionState()  # no public API says where a table points
    catalog, identifier = state.catalog(), state.sqlParser().parseTableIdentifier(name)
    if not catalog.tableExists(identifier):
        return None
    table = catalog.getTableRawMetadata(identifier)
    kind = table.tableType().name()
    if kind != "EXTERNAL":
        raise GraphError(f"the session catalog has a {kind.lower()} table {name} of its own; "
                         "the pipeline's table of that name cannot be registered over it")
    # As a path, not a URI: `where` it is compared with is not escaped (spaces, say).
    jvm: Any = spark._jvm
    location = str(jvm.org.apache.hadoop.fs.Path(table.location()).toString())
    return CatalogEntry(catalog, identifier, table, location.removeprefix("file:"))


def point_at(spark: SparkSession, entry: CatalogEntry, where: str) -> bool:
    """Point the session catalog's external table `entry` at `where` by changing its location
    alone. DROP TABLE and CREATE TABLE ... LOCATION (`register`'s other way) each load the
    table through Delta's catalog, about 70 ms of the JVM's CPU a table, while the entry of a
    Delta table holds no schema or properties (Delta reads them from the log), only its
    location. False, nothing done, when the entry is not such a Delta table's (a user's table
    of another format), or when the session caches a query (DROP TABLE uncaches what read the
    old table)."""
    jvm: Any = spark._jvm  # no public API moves an entry
    if not spark._jsparkSession.sharedState().cacheManager().isEmpty():
        return False
    table = entry.table
    provider, storage = table.provider(), table.storage()
    # Delta's entry in the in-memory catalog: no schema, no storage properties (a Hive
    # metastore's would name the old path again in `path`).
    if provider.isEmpty() or provider.get().lower() != "delta" or table.schema().size() > 0 \
            or not storage.properties().isEmpty():
        return False
    location = jvm.scala.Option.apply(jvm.org.apache.hadoop.fs.Path(where).toUri())
    entry.catalog.alterTable(table.withNewStorage(
        location, storage.inputFormat(), storage.outputFormat(), storage.compressed(),
        storage.serde(), storage.properties(), storage.serdeName()))
    entry.catalog.invalidateCachedTable(entry.identifier)
    return True
