"""Validate the warehouse tables with Great Expectations on Spark and build Data Docs.

An ephemeral GX context (nothing to commit, no `gx/` folder) with one Spark data source; each
table is a DataFrame asset validated against its suite from `gx_suites`. Data Docs (static HTML)
go to a folder of your choice, by default `.local/quality/data_docs/` (git-ignored).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from exactly_once.errors import QualityError
from exactly_once.local.storage.delta_log import is_delta_table
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.quality.gx_suites import build_suite
from exactly_once.quality.paths import DEFAULT_DATA_DOCS
from exactly_once.settings.pipeline import Settings
from exactly_once.settings.quality import TableQuality

__all__ = ["DEFAULT_DATA_DOCS", "QualityError", "validate", "warehouse_reader", "catalog_reader"]
SITE = "exactly_once"  # our Data Docs site (the ephemeral context has its own `local_site`)


@dataclass
class SuiteOutcome:
    table: str
    success: bool
    evaluated: int
    failed: list[str] = field(default_factory=list)  # "expectation type (column): detail"
    rows: int = 0
    seconds: float = 0.0


@dataclass
class ValidationReport:
    outcomes: list[SuiteOutcome]
    data_docs_index: Path | None = None
    seconds: float = 0.0

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    def summary(self) -> str:
        lines = []
        for o in self.outcomes:
            mark = "✓" if o.success else "✗"
            lines.append(f"{mark} {o.table:<24} {o.evaluated - len(o.failed):>3}/{o.evaluated} "
                         f"expectations passed ({o.rows:,} rows, {o.seconds:.1f}s)")
            lines += [f"    failed: {f}" for f in o.failed]
        failed = sum(not o.success for o in self.outcomes)
        lines.append(f"{len(self.outcomes) - failed}/{len(self.outcomes)} suites passed "
                     f"in {self.seconds:.1f}s")
        if self.data_docs_index:
            lines.append(f"Data Docs: {self.data_docs_index}")
        return "\n".join(lines)


def warehouse_reader(spark: SparkSession, warehouse: Path) -> Callable[[str], DataFrame]:
    def read(name: str) -> DataFrame:
        path = Warehouse(warehouse).table_path(name)
        if not is_delta_table(path):
            raise QualityError(f"no table `{name}` in {warehouse}; run the pipeline first")
        return spark.read.format("delta").load(str(path.resolve()))

    return read


def catalog_reader(spark: SparkSession, schema: str | None) -> Callable[[str], DataFrame]:
    """Tables by name (on Databricks: the pipeline's catalog.schema)."""
    def read(name: str) -> DataFrame:
        qualified = f"{schema}.{name}" if schema else name
        try:
            return spark.read.table(qualified)
        except Exception:
            raise QualityError(f"no table `{qualified}`; run the pipeline first") from None

    return read


def _context(data_docs: Path | None):
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # only cosmetic
        pass
    if data_docs is not None:
        context.add_data_docs_site(site_name=SITE, site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                              "base_directory": str(data_docs.resolve())},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        })
    return context


def _describe(result) -> str:
    config = result.expectation_config
    kwargs = config.kwargs
    subject = kwargs.get("column") or ""
    what = config.description or config.type
    observed = result.result or {}
    detail = observed.get("unexpected_count", observed.get("observed_value"))
    return f"{what}{f' ({subject})' if subject else ''}: {detail}"


def validate(spark: SparkSession, read: Callable[[str], DataFrame],
             quality: dict[str, TableQuality], settings: Settings | None,
             data_docs: Path | None = DEFAULT_DATA_DOCS) -> ValidationReport:
    import great_expectations as gx

    started = time.monotonic()
    frames = {name: read(name) for name in quality}  # fail fast on a missing table
    context = _context(data_docs)
    source = context.data_sources.add_spark(name="warehouse")
    outcomes = []
    for name, tq in quality.items():
        t0 = time.monotonic()
        df = frames[name]
        params = {}
        if tq.parameter and tq.keys_at_most_in:  # the one implies the other
            other, key = tq.keys_at_most_in["table"], tq.keys_at_most_in["key"]
            # An aggregate without grouping has exactly one row.
            (distinct_keys,) = (frames.get(other) or read(other)) \
                .agg(F.countDistinct(key)).collect()
            params[tq.parameter] = distinct_keys[0]
        suite = context.suites.add(build_suite(tq, settings, df))
        batch = source.add_dataframe_asset(name=name).add_batch_definition_whole_dataframe(name)
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=name, data=batch, suite=suite))
        result = definition.run(batch_parameters={"dataframe": df},
                                expectation_parameters=params, result_format="SUMMARY")
        failed = [_describe(r) for r in result.results if not r.success]
        outcomes.append(SuiteOutcome(name, bool(result.success), len(result.results), failed,
                                     rows=df.count(),
                                     seconds=time.monotonic() - t0))
    index = None
    if data_docs is not None:
        context.build_data_docs(site_names=[SITE])
        index = data_docs / "index.html"
    return ValidationReport(outcomes, index, time.monotonic() - started)
