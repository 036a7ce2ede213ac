"""The Databricks Asset Bundle's pipeline resource, derived from `conf/` so the two cannot drift.

`conf/` is the one place settings live. The bundle's pipeline `configuration` must carry exactly
the keys `load_settings(target).to_conf()` produces, because the pipeline reads them back with
`pipeline_settings(spark)`, and the pipeline's own parameters, conf/'s `configuration:`
(settings/configuration.py), which pipeline code reads with `spark.conf.get`. This module renders
resources/exactly_once.pipeline.yml from conf/:

* a setting that is the same in every deploy target is written as a literal;
* a setting that may differ per target is written as `${var.<name>}` (see `bundle_variables`),
  and databricks.yml sets that variable in each target to the value conf/targets/<target>.yml
  gives; so is a parameter of `configuration:` whose value differs between deploy targets
  (its variable named after its key: `mypipeline.startDate` is `mypipeline_startdate`);
* a setting that differs between targets without a variable is an error naming it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from exactly_once.deploy.targets import DEPLOY_TARGETS
from exactly_once.errors import SettingsError
from exactly_once.paths import CONF_DIR, PROJECT_ROOT
from exactly_once.settings.pipeline import PREFIX, load_settings

PIPELINE_KEY = "exactly_once_pipeline"
PIPELINE_RESOURCE = PROJECT_ROOT / "resources" / "exactly_once.pipeline.yml"
BUNDLE_FILE = PROJECT_ROOT / "databricks.yml"
# Bundle variables that are not pipeline settings, but every target must set.
TARGET_ONLY_VARIABLES = ("catalog", "schema")


def bundle_variables(conf: dict[str, str], parameters: Iterable[str] = ()) -> dict[str, str]:
    """Pipeline setting -> the bundle variable that carries it, for the settings `conf` and the
    configuration `parameters` whose values differ between deploy targets."""
    variables = {
        f"{PREFIX}.kafka.bootstrap_servers": "kafka_bootstrap_servers",
        f"{PREFIX}.kafka.secret_scope": "kafka_secret_scope",
    }
    for topic in _names(conf, "topics"):
        variables[f"{PREFIX}.topics.{topic}.watermark_delay"] = f"{topic}_watermark_delay"
    for export in _names(conf, "exports"):  # where the export lands: a Volume per target
        variables[f"{PREFIX}.exports.{export}.path"] = f"{export}_export_path"
    for key in parameters:
        name = re.sub(r"[^0-9a-z]+", "_", key.lower()).strip("_")
        if name in (*variables.values(), *TARGET_ONLY_VARIABLES):
            raise SettingsError(f"configuration key {key}: its bundle variable {name} is "
                                "already another setting's")
        variables[key] = name
    return variables


def varying_parameters(targets: tuple[str, ...] = DEPLOY_TARGETS,
                       conf_dir: Path = CONF_DIR) -> list[str]:
    """The configuration keys whose values differ between `targets`."""
    configurations = [load_settings(t, conf_dir).configuration for t in targets]
    keys = dict.fromkeys(k for c in configurations for k in c)
    return [k for k in keys if len({c.get(k) for c in configurations}) > 1]


def _names(conf: dict[str, str], section: str) -> list[str]:
    return [n for n in conf.get(f"{PREFIX}.{section}", "").split(",") if n]


def pipeline_configuration(targets: tuple[str, ...] = DEPLOY_TARGETS,
                           conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """The pipeline `configuration` mapping, `${var.*}` where the value is per target."""
    confs = {t: load_settings(t, conf_dir).pipeline_configuration() for t in targets}
    first = confs[targets[0]]
    for target, conf in confs.items():
        if conf.keys() != first.keys():
            raise SettingsError(f"targets {targets[0]} and {target} define different settings: "
                                f"{sorted(conf.keys() ^ first.keys())}")
    variables = bundle_variables(first, varying_parameters(targets, conf_dir))
    configuration = {}
    for key, value in first.items():
        if key in variables:
            configuration[key] = "${var." + variables[key] + "}"
        elif any(conf[key] != value for conf in confs.values()):
            raise SettingsError(f"setting {key} differs between targets {list(targets)}; give it "
                                "a bundle variable in bundle_variables "
                                "(exactly_once.deploy.bundle_resource)")
        else:
            configuration[key] = value
    return configuration


def target_variables(target: str, conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """The values databricks.yml must give the pipeline variables in `target`."""
    conf = load_settings(target, conf_dir).pipeline_configuration()
    variables = bundle_variables(conf, varying_parameters(conf_dir=conf_dir))
    return {name: conf[key] for key, name in variables.items()}


_HEADER = """\
# GENERATED from conf/ by `make bundle-config` (python -m exactly_once.deploy write); edit
# conf/base.yml or conf/targets/<target>.yml, then regenerate. tests/test_bundle.py fails while this
# file is stale.
#
# The pipeline: exactly the files under pipelines/ that the local runtime loads, with the
# project's package installed in its environment. `configuration` is
# load_settings(<target>).to_conf() and conf/'s `configuration:` (the pipeline's parameters); the
# pipeline reads both with spark.conf.get.

resources:
  pipelines:
    {key}:
      name: exactly_once_pipeline
      catalog: ${{var.catalog}}
      schema: ${{var.schema}}
      serverless: true            # for classic compute: remove, and add `clusters:` + `edition`
      continuous: false           # triggered updates; the job below starts them
      channel: CURRENT
      root_path: ../pipelines
      libraries:
        - glob:
            include: ../pipelines/**
      environment:
        dependencies:
          # The project's package, editable from the deployed bundle files (as the templates do),
          # so `from exactly_once...` imports the same code as locally.
          - --editable ${{workspace.file_path}}
      configuration:
"""


def render_pipeline_resource(conf_dir: Path = CONF_DIR) -> str:
    # One line per setting (no folding), so a diff shows exactly which setting changed.
    configuration = yaml.safe_dump(pipeline_configuration(conf_dir=conf_dir), sort_keys=False,
                                   width=1_000_000, allow_unicode=True)
    body = "".join(f"        {line}\n" for line in configuration.splitlines())
    return _HEADER.format(key=PIPELINE_KEY) + body


def problems(conf_dir: Path = CONF_DIR, resource: Path = PIPELINE_RESOURCE,
             bundle_file: Path = BUNDLE_FILE) -> list[str]:
    """What is out of step between conf/, the pipeline resource and databricks.yml."""
    found = []
    if not resource.exists() or resource.read_text() != render_pipeline_resource(conf_dir):
        found.append(f"{resource.name} is stale: run `make bundle-config`")
    bundle = yaml.safe_load(bundle_file.read_text()) or {}
    declared = bundle.get("variables") or {}
    for target in DEPLOY_TARGETS:
        given = ((bundle.get("targets") or {}).get(target) or {}).get("variables") or {}
        for name in TARGET_ONLY_VARIABLES:
            if given.get(name) in (None, "") and "default" not in (declared.get(name) or {}):
                found.append(f"databricks.yml: target {target} does not set variable {name}")
        for name, value in target_variables(target, conf_dir).items():
            if name not in declared:
                found.append(f"databricks.yml: variable {name} is not declared")
            if str(given.get(name)) != value:
                found.append(f"databricks.yml: target {target} sets {name}={given.get(name)!r}, "
                             f"conf/targets/{target}.yml gives {value!r}")
    return found
