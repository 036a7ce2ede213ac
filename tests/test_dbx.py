"""dbx 0.8 (legacy deployments): its own environment, and a deployment file describing the same
pipeline files, settings and quality job as the bundle. `make dbx-env` installs it (make test does).
"""

from __future__ import annotations

import json
import subprocess

import pydantic
import pytest
import yaml

from exactly_once.deploy import dbx_deployment
from exactly_once.deploy.targets import DEPLOY_TARGETS, quality_parameters
from exactly_once.paths import PIPELINES_DIR, PROJECT_ROOT, pipeline_files
from exactly_once.settings.pipeline import load_settings

DBX_VENV = PROJECT_ROOT / ".venv-dbx"
DBX = DBX_VENV / "bin" / "dbx"


def _dbx_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(DBX_VENV / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def dbx():
    if not DBX.exists():
        pytest.fail(f"{DBX} is missing: run `make dbx-env` (make test does)")
    return DBX


def test_main_environment_keeps_pydantic_v2():
    assert pydantic.VERSION.startswith("2"), pydantic.VERSION


@pytest.mark.parametrize("args", [["--help"], ["deploy", "--help"]])
def test_dbx_runs_in_its_own_environment(dbx, args):
    result = subprocess.run([str(dbx), *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Usage: dbx" in result.stdout


def test_deployment_file_parses_with_dbx_own_models(dbx):
    # dbx's pydantic-v1 models read the file as `dbx deploy` does (no workspace needed); what they
    # would send must keep the serverless / Unity Catalog fields dbx 0.8 has no models for.
    result = _dbx_python(
        "import json\n"
        "from pathlib import Path\n"
        "from dbx.api.config_reader import ConfigReader\n"
        f"reader = ConfigReader(Path({str(dbx_deployment.DBX_DEPLOYMENT)!r}))\n"
        "out = {}\n"
        "for env in ('dev', 'prod'):\n"
        "    workflows = reader.get_environment(env).payload.workflows\n"
        "    out[env] = [[type(w).__name__, w.dict(exclude_none=True)] for w in workflows]\n"
        "print(json.dumps(out))\n")
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    for env in DEPLOY_TARGETS:
        (p_type, pipeline), (j_type, job) = parsed[env]
        assert (p_type, j_type) == ("Pipeline", "Workflow")
        assert pipeline["name"] == f"exactly_once_pipeline_{env}"
        assert pipeline["serverless"] is True and pipeline["catalog"] and pipeline["schema"]
        assert pipeline["environment"]["dependencies"]
        assert pipeline["configuration"] == load_settings(env).to_conf()
        assert job["tasks"][1]["environment_key"] == job["environments"][0]["environment_key"]


def test_deployment_file_describes_the_same_pipeline_and_quality_job():
    doc = yaml.safe_load(dbx_deployment.DBX_DEPLOYMENT.read_text())
    local_files = [p.relative_to(PROJECT_ROOT).as_posix() for p in pipeline_files(PIPELINES_DIR)]
    for env in DEPLOY_TARGETS:
        pipeline, job = doc["environments"][env]["workflows"]
        folder = dbx_deployment.DBX_GIT_FOLDER.format(target=env)
        assert [lib["file"]["path"] for lib in pipeline["libraries"]] == \
            [f"{folder}/{f}" for f in local_files]
        assert pipeline["configuration"] == load_settings(env).to_conf()
        refresh, check = job["tasks"]
        assert refresh["pipeline_task"]["pipeline_id"] == f"pipeline://{pipeline['name']}"
        assert check["python_wheel_task"]["entry_point"] == "exactly-once"
        assert check["python_wheel_task"]["parameters"] == quality_parameters(
            env, f"{pipeline['catalog']}.{pipeline['schema']}")
        assert pipeline["environment"]["dependencies"] == [f"--editable {folder}"]
        # GX only where it runs: the quality job, not the pipeline.
        assert job["environments"][0]["spec"]["dependencies"] == [f"--editable {folder}[quality]"]


def test_deployment_file_is_up_to_date():
    assert dbx_deployment.problems() == []


def test_a_stale_deployment_file_is_reported(tmp_path):
    stale = tmp_path / "deployment.yml"
    stale.write_text(dbx_deployment.render_dbx_deployment().replace("no_build: true", "x: 1"))
    assert dbx_deployment.problems(dbx_file=stale) == \
        ["deployment.yml is stale: run `make bundle-config`"]
