"""A bundle's pipeline as the local runtime runs it.

Where its state lives, under the bundle's folder:

    <bundle>/.local/warehouse/          the pipeline's tables, checkpoints and event log (a
                                        bundle with several pipelines: .../warehouse/<key>/)
    <bundle>/.local/catalog/            the local catalog its tables are published in and its
                                        reads of other tables resolve in (local/catalog/)
    <bundle>/fixtures/                  tables the pipeline reads from outside, as files
                                        (`<catalog>.<schema>.<table>.json|csv|parquet`)

A warehouse given explicitly (`--warehouse DIR`) keeps its own catalog inside it, so that two
warehouses never share names.

A bundle that carries `conf/` (this project's settings: Kafka, topics, the contract) runs its
pipelines with those settings as their `exactly_once.*` configuration: conf/'s `local` target
unless a target is named; conf/ is what the bundle's resource is generated from
(deploy/bundle_resource.py). A bundle without conf/ needs none: its pipelines' configuration is
their resource's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly_once.bundle import Bundle, PipelineResource, load_bundle
from exactly_once.local.catalog.catalog import LocalCatalog
from exactly_once.local.catalog.names import DEFAULT_CATALOG, DEFAULT_SCHEMA, Namespace, TableName
from exactly_once.local.catalog.scope import ReadScope
from exactly_once.local.storage.files import StoragePath, location
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.settings.pipeline import Settings, load_settings
from exactly_once.settings.values import PREFIX

LOCAL_DIR = ".local"
FIXTURES_DIR = "fixtures"
CONF_DIR = "conf"
LOCAL_CONF_TARGET = "local"  # conf/'s target for local runs when none is named


@dataclass(frozen=True)
class LocalPipeline:
    """One pipeline of a bundle, with what running it locally needs."""

    bundle: Bundle
    resource: PipelineResource
    files: tuple[Path, ...]
    namespace: Namespace
    configuration: Mapping[str, str]  # the resource's, less what conf/ settings provide
    settings: Settings | None  # conf/'s, for a bundle that carries conf/
    warehouse: StoragePath
    catalog: LocalCatalog
    no_local_meaning: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.resource.key

    @property
    def root_path(self) -> Path | None:
        return self.resource.root_path

    @property
    def scope(self) -> ReadScope:
        return ReadScope(self.namespace, self.catalog, self.event_log)

    @property
    def event_log(self) -> TableName | None:
        """Where the pipeline publishes its event log (its `event_log`; a part not given is
        the pipeline's catalog or schema), or None."""
        given = self.resource.event_log
        if given is None:
            return None
        return TableName(given.catalog or self.namespace.catalog,
                         given.schema or self.namespace.schema, given.name)

    def run_arguments(self) -> dict[str, Any]:
        """What run_pipeline takes besides the session, the settings and the warehouse."""
        return {"files": self.files, "root_path": self.root_path, "scope": self.scope,
                "configuration": self.configuration}


def files_pipeline(folder: Path, files: tuple[Path, ...], settings: Settings | None = None,
                   configuration: Mapping[str, str] | None = None) -> LocalPipeline:
    """Pipeline files with no bundle around them (a folder of them, as `--pipelines DIR` gives):
    a pipeline `pipeline` publishing to `main.default`, stored under `folder`."""
    resource = PipelineResource(key="pipeline", name="pipeline", catalog=None, schema=None,
                                root_path=None, libraries=files,
                                configuration=dict(configuration or {}), declared_in=folder)
    bundle = Bundle(root=folder, name="pipeline", target="local", mode=None, variables={},
                    pipelines={"pipeline": resource})
    warehouse = folder / LOCAL_DIR / "warehouse"
    return LocalPipeline(bundle=bundle, resource=resource, files=files, namespace=Namespace(),
                         configuration=dict(configuration or {}), settings=settings,
                         warehouse=warehouse, catalog=LocalCatalog(folder / LOCAL_DIR / "catalog",
                                                                   folder / FIXTURES_DIR))


def conf_dir(bundle_root: Path) -> Path | None:
    """The bundle's conf/ (this project's settings), or None when it carries none."""
    folder = bundle_root / CONF_DIR
    return folder if (folder / "base.yml").is_file() else None


def open_bundle(folder: Path | None = None, target: str | None = None,
                variables: Mapping[str, str] | None = None) -> Bundle:
    return load_bundle(folder, target, variables)


def local_pipeline(bundle: Bundle, key: str | None = None, *,
                   settings: Settings | None = None, warehouse: StoragePath | None = None,
                   catalog_root: Path | None = None, files: tuple[Path, ...] | None = None
                   ) -> LocalPipeline:
    """Pipeline `key` of `bundle` (None: its only one), locally. `settings`: the project's
    settings to run it with (None: conf/'s `local` target when the bundle carries conf/);
    `warehouse`: its storage (None: under the bundle's .local/), with its own catalog inside
    it when given; `files`: other source files than the resource's libraries."""
    resource = bundle.pipeline(key)
    local = bundle.root / LOCAL_DIR
    if settings is None and (conf := conf_dir(bundle.root)) is not None:
        settings = load_settings(LOCAL_CONF_TARGET, conf)
    configuration = dict(resource.configuration)
    if settings is not None:  # conf/ provides the project's settings and its parameters
        configuration = {k: v for k, v in configuration.items()
                         if k != PREFIX and not k.startswith(f"{PREFIX}.")
                         and k not in settings.configuration}
    if warehouse is None:
        warehouse = local / "warehouse"
        if len(bundle.pipelines) > 1:
            warehouse = warehouse / resource.key
        catalog_root = catalog_root or local / "catalog"
    return LocalPipeline(
        bundle=bundle, resource=resource, files=resource.libraries if files is None else files,
        namespace=Namespace(resource.catalog or DEFAULT_CATALOG,
                            resource.schema or DEFAULT_SCHEMA),
        configuration=configuration, settings=settings, warehouse=warehouse,
        catalog=LocalCatalog(catalog_root or Warehouse(location(str(warehouse))).catalog_root(),
                             bundle.root / FIXTURES_DIR),
        no_local_meaning=dict(resource.no_local_meaning))
