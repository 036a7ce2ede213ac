"""What a name read in pipeline code means: the pipeline's own dataset, a table of the local
catalog, or one of Spark's own (a temporary view, a table of the session catalog); and where the
pipeline publishes its event log, when its bundle names it (`event_log`).

Databricks resolves a pipeline's reads against its default catalog and schema: `orders`,
`sales.orders` and `main.sales.orders` are the pipeline's dataset `orders` when it publishes to
`main.sales`, and `main.gold.orders` its dataset `gold.orders` when it publishes one there
(names.py); any other name is a table of the metastore. Locally that metastore is the local
catalog (catalog.py), and a name nothing supplies is one line saying how to supply it.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import CatalogError
from exactly_once.local.catalog.catalog import LocalCatalog
from exactly_once.local.catalog.names import Namespace, NameSyntaxError, TableName, split
from exactly_once.local.engine import catalog_plugin


@dataclass(frozen=True)
class ReadScope:
    namespace: Namespace
    catalog: LocalCatalog
    # The name the pipeline publishes its event log under (a bundle pipeline's `event_log`),
    # or None: then it is the warehouse's alone, as Databricks keeps it hidden.
    event_log: TableName | None = None

    def published_event_log(self, datasets: Container[str]) -> TableName | None:
        """The name the event log is published under, or None; a name of one of the
        pipeline's `datasets` is a one-line CatalogError (one name, one table)."""
        if self.event_log is not None \
                and (key := self.namespace.dataset_key(self.event_log)) in datasets:
            raise CatalogError(f"event_log: {self.event_log} is the pipeline's dataset "
                               f"`{key}`; give the event log a name of its own")
        return self.event_log

    def dataset(self, text: str, datasets: Container[str]) -> str | None:
        """The pipeline's dataset `text` names, or None when it names none."""
        try:
            name = self.namespace.dataset_name(text)
        except NameSyntaxError:
            return None
        return name if name in datasets else None

    def table(self, text: str) -> TableName | None:
        """The catalog table a name the pipeline does not define means; None for a name Spark
        resolves itself (the session catalog's, or not a name at all)."""
        try:
            parts = split(text)
        except NameSyntaxError:
            return None  # Spark's parser says what is wrong with it
        if len(parts) > 3 or (len(parts) == 3 and
                              parts[0].lower() in catalog_plugin.SESSION_CATALOGS):
            return None
        return self.namespace.qualify(parts)

    def external(self, spark: SparkSession, text: str, streaming: bool,
                 dataset: str | None = None, datasets: Iterable[str] = (),
                 options: Mapping[str, str] | None = None) -> DataFrame | None:
        """A read of a table the pipeline does not define, with its reader's `options`: from
        the local catalog, or None for Spark to resolve (a name of the session catalog, a
        temporary view); one line (MissingTableError) when nothing supplies it."""
        table = self.table(text)
        if table is None:
            return None
        df = self.catalog.read(spark, table, streaming, options)
        if df is not None:
            return df
        self.require(spark, text, table, dataset, datasets)
        return None

    def require(self, spark: SparkSession, text: str, table: TableName,
                dataset: str | None, datasets: Iterable[str] = ()) -> None:
        """Nothing but Spark's own session can supply `table`: it must, or the read is one
        line naming the table and the fixture file that would supply it (and the pipeline's
        `datasets`, which it may have meant)."""
        if len(split(text)) == 3 or not _spark_has(spark, text):
            raise self.catalog.missing(text, table, dataset, datasets)


def _spark_has(spark: SparkSession, text: str) -> bool:
    """Whether Spark's session resolves `text` (a temporary view, a session catalog table)."""
    try:
        return bool(spark.catalog.tableExists(text))
    except Exception:  # noqa: BLE001 - a name Spark cannot even look up is not Spark's
        return False
