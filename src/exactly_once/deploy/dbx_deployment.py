"""conf/deployment.yml for dbx 0.8 (legacy deployments): the same pipeline files, settings and
quality job as the bundle, derived from `conf/`.

dbx 0.8 uploads local files to DBFS, where a pipeline cannot load source files from. So on dbx the
pipeline reads its files, and installs the package (editable, as the bundle templates do), from a
Databricks Git folder holding this repository at the deployed commit; see docs/deploy.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from exactly_once.deploy.targets import DEPLOY_TARGETS, quality_parameters
from exactly_once.paths import CONF_DIR, PROJECT_ROOT, pipeline_files
from exactly_once.settings.pipeline import load_settings

DBX_DEPLOYMENT = CONF_DIR / "deployment.yml"
DBX_GIT_FOLDER = "/Workspace/Shared/exactly-once-lakehouse-{target}"
DBX_CATALOG = "main"
DBX_SCHEMA = {"dev": "exactly_once_dev", "prod": "exactly_once"}


def dbx_deployment(conf_dir: Path = CONF_DIR) -> dict[str, Any]:
    """conf/deployment.yml for dbx 0.8: the same pipeline files, settings and quality job."""
    files = [p.relative_to(PROJECT_ROOT).as_posix() for p in pipeline_files()]
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
            "configuration": load_settings(target, conf_dir).pipeline_configuration(),
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
# GENERATED from conf/ by `make bundle-config` (python -m exactly_once.deploy write).
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


def problems(conf_dir: Path = CONF_DIR, dbx_file: Path = DBX_DEPLOYMENT) -> list[str]:
    """What is out of step between conf/ and the dbx deployment file."""
    if not dbx_file.exists() or dbx_file.read_text() != render_dbx_deployment(conf_dir):
        return [f"{dbx_file.name} is stale: run `make bundle-config`"]
    return []
