"""Entry point of the local runtime: settings in, one pipeline update out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from pyspark.sql import SparkSession

from exactly_once.local.catalog.scope import ReadScope
from exactly_once.local.engine import update_settings
from exactly_once.local.execution import schema_check
from exactly_once.local.execution.rederive import rederived_tables
from exactly_once.local.execution.refresh import RefreshSelection
from exactly_once.local.execution.update import PipelineUpdate, default_scope
from exactly_once.local.graph.loader import by_value_under, importable, load_graph
from exactly_once.local.observe.progress import Progress, UpdateResult
from exactly_once.local.observe.timeline import UPDATE, Timeline
from exactly_once.local.storage import state_store
from exactly_once.local.storage.files import StoragePath, location
from exactly_once.local.storage.lock import WarehouseLock
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.paths import PIPELINES_DIR, pipeline_files
from exactly_once.settings.pipeline import Settings
from exactly_once.settings.values import PREFIX


def run_pipeline(spark: SparkSession, settings: Settings | None, warehouse: StoragePath | str,
                 full_refresh: bool | Sequence[str] = False, progress: Progress | None = None,
                 pipelines_dir: Path = PIPELINES_DIR, refresh: Sequence[str] = (),
                 timeline: Timeline | None = None,
                 rederive: Sequence[str] | None = None,
                 configuration: Mapping[str, str] | None = None,
                 files: Sequence[Path] | None = None, root_path: Path | None = None,
                 scope: ReadScope | None = None) -> UpdateResult:
    """Run one triggered update of the pipeline files in `pipelines_dir` (or `files`, a bundle
    pipeline's libraries) into `warehouse`.

    `full_refresh`: True resets every table that allows it (--full-refresh-all), a list of
    names resets those (--full-refresh T ...); `refresh`: update only these tables;
    `rederive`: re-derive these tables and what reads them from bronze, protected ones
    included ([]: every table derived from bronze; rederive.py). Holds the
    warehouse's lock throughout: a second concurrent update fails with WarehouseLockedError.
    `timeline`: where the update records its phases (`Timeline(spark_jobs=True)` also counts
    Spark jobs); the result carries it either way. `warehouse`: a local directory or an
    `s3a://bucket/prefix` (files.py). `configuration`: pipeline parameters for this update,
    over the settings' own (conf/'s `configuration:`, settings/configuration.py); with no
    `settings` (a pipeline without conf/), the whole of its configuration. `root_path`: a
    folder pipeline code imports modules from, as a bundle pipeline's `root_path` is on
    Databricks. `scope`: the pipeline's catalog and schema and the local catalog its reads
    resolve in (default: the warehouse's own catalog, `main.default`).
    """
    with WarehouseLock(warehouse):
        return run_update(spark, settings, warehouse, full_refresh, progress, pipelines_dir,
                          refresh, timeline, rederive, configuration=configuration,
                          files=files, root_path=root_path, scope=scope)


def run_update(spark: SparkSession, settings: Settings | None, warehouse: StoragePath | str,
               full_refresh: bool | Sequence[str] = False, progress: Progress | None = None,
               pipelines_dir: Path = PIPELINES_DIR, refresh: Sequence[str] = (),
               timeline: Timeline | None = None,
               rederive: Sequence[str] | None = None,
               configuration: Mapping[str, str] | None = None,
               files: Sequence[Path] | None = None, root_path: Path | None = None,
               scope: ReadScope | None = None) -> UpdateResult:
    """`run_pipeline` for a caller that holds the warehouse's lock already (continuous.py holds
    it across its updates). The pipeline's configuration is in the session for this update
    only (engine/update_settings.py), checked before anything else."""
    selection = RefreshSelection.of(full_refresh, refresh)
    lake = Warehouse(location(warehouse))
    scope = scope or default_scope(lake)
    settings_conf, parameters = pipeline_configuration(settings, configuration)
    update_settings.check_configuration(spark, parameters)
    for key, value in settings_conf.items():
        if key.startswith(f"{PREFIX}.exports.") and key.endswith(".path"):
            value = scope.catalog.volume_path(value)  # a /Volumes/... export, locally
        spark.conf.set(key, value)  # what the bundle's pipeline `configuration` does on Databricks
    timeline = timeline or Timeline()
    due = snapshot_due(spark, lake)
    with update_settings.configured(spark, parameters), \
            update_settings.applied(spark, update_settings.for_update(snapshot_state=due)), \
            (importable(root_path) if root_path else nullcontext()):
        with timeline.span(UPDATE, "load pipeline files"):
            sources = list(files) if files is not None else pipeline_files(pipelines_dir)
            graph = load_graph(spark, sources, scope.namespace)
            if root_path:
                by_value_under(root_path)
            # Pipeline parameters decide queries as settings do.
            definition = schema_check.fingerprint({**settings_conf, **parameters}, sources)
        if rederive is not None:
            with timeline.span(UPDATE, "choose tables to re-derive"):
                selection = RefreshSelection(rederive=tuple(
                    rederived_tables(spark, graph, lake, rederive)))
        return PipelineUpdate(spark, graph, lake, progress, timeline,
                              definition=definition, scope=scope).run(selection)


def pipeline_configuration(settings: Settings | None, configuration: Mapping[str, str] | None
                           ) -> tuple[dict[str, str], dict[str, str]]:
    """The project's settings as Spark conf (`exactly_once.*`, none without conf/) and the
    pipeline's parameters: conf/'s `configuration:` with `configuration` over it."""
    if settings is None:
        return {}, dict(configuration or {})
    if configuration:
        settings = replace(settings, configuration={**settings.configuration, **configuration})
    return settings.to_conf(), dict(settings.configuration)


def snapshot_due(spark: SparkSession, warehouse: Warehouse) -> bool:
    """Whether a flow's state store has gone long enough without a snapshot that this update
    writes one (engine/update_settings.py)."""
    every = update_settings.snapshot_every(spark)
    return any(state_store.versions_since_snapshot(checkpoint) >= every
               for checkpoint in warehouse.checkpoints())
