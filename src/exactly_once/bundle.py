"""The Databricks bundle's pipeline configuration, derived from `conf/` so the two cannot drift.

`conf/` is the one place settings live. The bundle's pipeline `configuration` must carry exactly
the keys `load_settings(target).to_conf()` produces, because the pipeline reads them back with
`pipeline_settings(spark)`. This module renders resources/exactly_once.pipeline.yml from conf/:

* a setting that is the same in every deploy target is written as a literal;
* a setting that may differ per target is written as `${var.<name>}` (see BUNDLE_VARIABLES), and
  databricks.yml sets that variable in each target to the value conf/targets/<target>.yml gives;
* a setting that differs between targets without a variable is an error naming it.

    python -m exactly_once.bundle write       # regenerate the pipeline resource + dbx file
    python -m exactly_once.bundle check       # exit 1 naming what is stale (tests do the same)
    python -m exactly_once.bundle variables dev   # the variable values databricks.yml must set
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from exactly_once.config import PREFIX, SettingsError, load_settings
from exactly_once.paths import CONF_DIR, PROJECT_ROOT

DEPLOY_TARGETS = ("dev", "prod")
PIPELINE_KEY = "exactly_once_pipeline"
PIPELINE_RESOURCE = PROJECT_ROOT / "resources" / "exactly_once.pipeline.yml"
BUNDLE_FILE = PROJECT_ROOT / "databricks.yml"
DBX_DEPLOYMENT = CONF_DIR / "deployment.yml"
# Bundle variables that are not pipeline settings, but every target must set.
TARGET_ONLY_VARIABLES = ("catalog", "schema")

_VAR = re.compile(r"\$\{var\.([A-Za-z0-9_]+)\}")


def bundle_variables(topics: list[str]) -> dict[str, str]:
    """Pipeline setting -> the bundle variable that carries it."""
    variables = {
        f"{PREFIX}.kafka.bootstrap_servers": "kafka_bootstrap_servers",
        f"{PREFIX}.kafka.secret_scope": "kafka_secret_scope",
    }
    for topic in topics:
        variables[f"{PREFIX}.topics.{topic}.watermark_delay"] = f"{topic}_watermark_delay"
    return variables


def pipeline_configuration(targets: tuple[str, ...] = DEPLOY_TARGETS,
                           conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """The pipeline `configuration` mapping, `${var.*}` where the value is per target."""
    confs = {t: load_settings(t, conf_dir).to_conf() for t in targets}
    first = confs[targets[0]]
    for target, conf in confs.items():
        if conf.keys() != first.keys():
            raise SettingsError(f"targets {targets[0]} and {target} define different settings: "
                                f"{sorted(conf.keys() ^ first.keys())}")
    variables = bundle_variables(first[f"{PREFIX}.topics"].split(","))
    configuration = {}
    for key, value in first.items():
        if key in variables:
            configuration[key] = "${var." + variables[key] + "}"
        elif any(conf[key] != value for conf in confs.values()):
            raise SettingsError(f"setting {key} differs between targets {list(targets)}; give it "
                                "a bundle variable in exactly_once.bundle.bundle_variables")
        else:
            configuration[key] = value
    return configuration


def target_variables(target: str, conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """The values databricks.yml must give the pipeline variables in `target`."""
    conf = load_settings(target, conf_dir).to_conf()
    variables = bundle_variables(conf[f"{PREFIX}.topics"].split(","))
    return {name: conf[key] for key, name in variables.items()}


def resolve(value: Any, variables: Mapping[str, str]) -> Any:
    """`${var.x}` references in a YAML value replaced by their values (others left alone)."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: str(variables[m.group(1)]), value)
    if isinstance(value, Mapping):
        return {k: resolve(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, variables) for v in value]
    return value


_HEADER = """\
# GENERATED from conf/ by `make bundle-config` (python -m exactly_once.bundle write); edit
# conf/base.yml or conf/targets/<target>.yml, then regenerate. tests/test_bundle.py fails while this
# file is stale.
#
# The pipeline: exactly the files under pipelines/ that the local runtime loads, with the
# project's package installed in its environment. `configuration` is
# load_settings(<target>).to_conf(); the pipeline reads it back with spark.conf.get.

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


# dbx (legacy) -------------------------------------------------------------------------------------
# dbx 0.8 uploads local files to DBFS, where a pipeline cannot load source files from. So on dbx the
# pipeline reads its files, and installs the package (editable, as the bundle templates do), from a
# Databricks Git folder holding this repository at the deployed commit; see docs/deploy.md.
DBX_GIT_FOLDER = "/Workspace/Shared/exactly-once-lakehouse-{target}"
DBX_CATALOG = "main"
DBX_SCHEMA = {"dev": "exactly_once_dev", "prod": "exactly_once"}


def quality_parameters(target: str, schema: str) -> list[str]:
    """argv of `exactly-once` in the quality job: validate the target's published tables."""
    return ["quality", "validate", "--target", target, "--schema", schema]


def dbx_deployment(conf_dir: Path = CONF_DIR) -> dict[str, Any]:
    """conf/deployment.yml for dbx 0.8: the same pipeline files, settings and quality job."""
    from exactly_once.local.loader import pipeline_files
    from exactly_once.paths import PIPELINES_DIR

    files = [p.relative_to(PROJECT_ROOT).as_posix() for p in pipeline_files(PIPELINES_DIR)]
    environments = {}
    for target in DEPLOY_TARGETS:
        folder = DBX_GIT_FOLDER.format(target=target)
        pipeline = {
            "name": f"exactly_once_pipeline_{target}",
            "workflow_type": "pipeline",
            "catalog": DBX_CATALOG,
            "schema": DBX_SCHEMA[target],
            "serverless": True,
            "continuous": False,
            "libraries": [{"file": {"path": f"{folder}/{f}"}} for f in files],
            "environment": {"dependencies": [f"--editable {folder}"]},
            "configuration": load_settings(target, conf_dir).to_conf(),
        }
        job = {
            "name": f"exactly_once_quality_{target}",
            "workflow_type": "job-v2.1",
            "max_concurrent_runs": 1,
            "tasks": [
                {"task_key": "refresh_pipeline",
                 "pipeline_task": {"pipeline_id": f"pipeline://exactly_once_pipeline_{target}"}},
                {"task_key": "validate_quality",
                 "depends_on": [{"task_key": "refresh_pipeline"}],
                 "environment_key": "default",
                 "python_wheel_task": {
                     "package_name": "exactly_once_lakehouse",
                     "entry_point": "exactly-once",
                     "parameters": quality_parameters(target,
                                                      f"{DBX_CATALOG}.{DBX_SCHEMA[target]}"),
                 }},
            ],
            # Serverless, with the package installed editable from the Git folder: conf/ is then
            # next to it, where `quality validate` reads the target's expectations. The `quality`
            # extra brings Great Expectations, which the pipeline's environment does without.
            "environments": [{"environment_key": "default", "spec": {
                "environment_version": "4", "dependencies": [f"--editable {folder}[quality]"]}}],
        }
        environments[target] = {"workflows": [pipeline, job]}
    return {"build": {"no_build": True}, "environments": environments}


_DBX_HEADER = """\
# GENERATED from conf/ by `make bundle-config` (python -m exactly_once.bundle write).
# dbx 0.8 (legacy; new deployments use the bundle in databricks.yml): the same pipeline files and
# settings as the bundle, plus the quality job. Install dbx with `make dbx-env`, then e.g.
#   .venv-dbx/bin/dbx deploy --environment dev --deployment-file conf/deployment.yml
# The pipeline reads its files from a Databricks Git folder holding this repository at the
# deployed commit (dbx uploads to DBFS, which pipelines cannot load sources from); see
# docs/deploy.md. Kafka credentials come from the secret scope named in the configuration.
"""


def render_dbx_deployment(conf_dir: Path = CONF_DIR) -> str:
    return _DBX_HEADER + yaml.safe_dump(dbx_deployment(conf_dir), sort_keys=False,
                                        width=1_000_000, allow_unicode=True)


def problems(conf_dir: Path = CONF_DIR, resource: Path = PIPELINE_RESOURCE,
             bundle_file: Path = BUNDLE_FILE, dbx_file: Path | None = None) -> list[str]:
    """What is out of step between conf/, the pipeline resource and databricks.yml."""
    found = []
    dbx_file = DBX_DEPLOYMENT if dbx_file is None else dbx_file
    if not resource.exists() or resource.read_text() != render_pipeline_resource(conf_dir):
        found.append(f"{resource.name} is stale: run `make bundle-config`")
    if not dbx_file.exists() or dbx_file.read_text() != render_dbx_deployment(conf_dir):
        found.append(f"{dbx_file.name} is stale: run `make bundle-config`")
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["write"]:
        PIPELINE_RESOURCE.write_text(render_pipeline_resource())
        DBX_DEPLOYMENT.write_text(render_dbx_deployment())
        print(f"wrote {PIPELINE_RESOURCE.relative_to(PROJECT_ROOT)} and "
              f"{DBX_DEPLOYMENT.relative_to(PROJECT_ROOT)}")
        return 0
    if args == ["check"]:
        found = problems()
        for problem in found:
            print(problem, file=sys.stderr)
        return 1 if found else 0
    if len(args) == 2 and args[0] == "variables":
        for name, value in target_variables(args[1]).items():
            print(f"{name}: {value}")
        return 0
    print("usage: python -m exactly_once.bundle write | check | variables TARGET", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
