"""The Databricks bundle: validated by the real Databricks CLI, in step with conf/ and pipelines/.

`databricks bundle validate` resolves the current user from the workspace (and checks the deploy
folder), so it runs against a stub workspace on loopback that answers those calls. Everything
else it does (schema, variables, interpolation, path translation) is the real CLI's, with
`--strict` so that schema warnings (unknown field, wrong type) fail too. `make databricks-cli`
builds the CLI; `make test` does that first.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from stub_workspace import CLI, USER, cli_environment

from exactly_once.deploy import bundle_resource
from exactly_once.deploy.dbx_deployment import DBX_DEPLOYMENT
from exactly_once.deploy.targets import DEPLOY_TARGETS, quality_parameters
from exactly_once.paths import PIPELINES_DIR, PROJECT_ROOT, pipeline_files
from exactly_once.settings.pipeline import load_settings

TARGETS = list(DEPLOY_TARGETS)


@pytest.fixture(scope="module")
def validate(workspace, tmp_path_factory):
    env = cli_environment(workspace, tmp_path_factory.mktemp("home"))

    def run(root: Path, target: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(CLI), "bundle", "validate", "--strict", "-t", target,
                               "-o", "json"], cwd=root, env=env, capture_output=True,
                              text=True, timeout=120)

    return run


def _bundle_copy(dest: Path) -> Path:
    for name in ("databricks.yml", "pyproject.toml"):
        shutil.copy(PROJECT_ROOT / name, dest / name)
    for name in ("resources", "pipelines"):
        shutil.copytree(PROJECT_ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def validated(validate) -> dict[str, dict]:
    results = {}
    for target in TARGETS:
        result = validate(PROJECT_ROOT, target)
        assert result.returncode == 0, f"bundle validate -t {target}:\n{result.stderr}"
        results[target] = json.loads(result.stdout)
    return results


@pytest.mark.parametrize("target", TARGETS)
def test_bundle_validates_and_carries_the_targets_settings(validated, target):
    config = validated[target]
    pipeline = config["resources"]["pipelines"][bundle_resource.PIPELINE_KEY]
    assert pipeline["configuration"] == load_settings(target).pipeline_configuration()
    assert pipeline["catalog"] and pipeline["schema"] and "${" not in pipeline["schema"]
    assert pipeline["continuous"] is False
    assert config["bundle"]["mode"] == ("development" if target == "dev" else "production")
    [library] = pipeline["libraries"]
    assert library["glob"]["include"].endswith("/files/pipelines/**")
    files = config["workspace"]["file_path"]
    assert pipeline["environment"]["dependencies"] == [f"--editable {files}"]


def test_prod_has_an_explicit_root_path_and_permissions(validated):
    prod = validated["prod"]
    assert prod["workspace"]["root_path"] == f"/Workspace/Users/{USER}/.bundle/exactly_once/prod"
    assert prod["permissions"]


@pytest.mark.parametrize("target", TARGETS)
def test_quality_job_refreshes_the_pipeline_then_validates(validated, target):
    job = validated[target]["resources"]["jobs"]["exactly_once_quality"]
    refresh, check = job["tasks"]
    assert refresh["pipeline_task"]["pipeline_id"] == \
        f"${{resources.pipelines.{bundle_resource.PIPELINE_KEY}.id}}"
    assert check["depends_on"] == [{"task_key": refresh["task_key"]}]
    wheel = check["python_wheel_task"]
    assert (wheel["package_name"], wheel["entry_point"]) == ("exactly_once_lakehouse",
                                                            "exactly-once")
    schema = validated[target]["resources"]["pipelines"][bundle_resource.PIPELINE_KEY]
    assert wheel["parameters"] == quality_parameters(
        target, f"{schema['catalog']}.{schema['schema']}")
    [env] = job["environments"]
    files = validated[target]["workspace"]["file_path"]
    assert env["spec"]["dependencies"] == [f"--editable {files}[quality]"]  # GX: quality only


@pytest.mark.parametrize("breakage, target, message", [
    (("resources/exactly_once.pipeline.yml", "      channel: CURRENT\n",
      "      channel: CURRENT\n      serverles: true\n"), "dev", "unknown field: serverles"),
    (("resources/exactly_once.pipeline.yml", "continuous: false", "continuous: maybe"), "dev",
     "expected bool, found string"),
    (("databricks.yml", "      kafka_secret_scope: exactly-once-prod\n", ""), "prod",
     "no value assigned to required variable kafka_secret_scope"),
    (("databricks.yml", "  name: exactly_once\n", "  name: [exactly_once]\n"), "dev",
     "expected string, found sequence"),
])
def test_a_broken_bundle_fails_validation(validate, tmp_path, breakage, target, message):
    root = _bundle_copy(tmp_path)
    path, old, new = breakage
    text = (root / path).read_text()
    assert old in text
    (root / path).write_text(text.replace(old, new, 1))
    result = validate(root, target)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_library_globs_resolve_to_the_files_the_local_runtime_loads():
    resource = yaml.safe_load(bundle_resource.PIPELINE_RESOURCE.read_text())
    pipeline = resource["resources"]["pipelines"][bundle_resource.PIPELINE_KEY]
    deployed = set()
    for library in pipeline["libraries"]:
        pattern = library["glob"]["include"]
        # Bundle paths are relative to the file that names them; `**` matches every file below.
        base = (bundle_resource.PIPELINE_RESOURCE.parent / pattern.removesuffix("**")).resolve()
        assert pattern.endswith("/**") and base.is_dir(), pattern
        deployed |= {p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert deployed == set(pipeline_files(PIPELINES_DIR)) != set()


def test_generated_pipeline_resource_is_up_to_date():
    assert bundle_resource.problems() == []


def test_a_stale_pipeline_resource_is_reported(tmp_path):
    stale = tmp_path / "exactly_once.pipeline.yml"
    text = bundle_resource.render_pipeline_resource()
    stale.write_text(text.replace("channel: CURRENT", "channel: X"))
    assert bundle_resource.problems(resource=stale)[0] == \
        "exactly_once.pipeline.yml is stale: run `make bundle-config`"


def test_deploy_generation_needs_neither_the_local_runtime_nor_spark():
    """`make bundle-config` and the checks run wherever conf/ is: no JVM, no local runtime."""
    result = subprocess.run(
        [sys.executable, "-c", "import sys, runpy\n"
         "sys.argv = ['deploy', 'check']\n"
         "try:\n    runpy.run_module('exactly_once.deploy', run_name='__main__')\n"
         "except SystemExit as done:\n    code = done.code\n"
         "print(code, sorted(m for m in sys.modules if m.startswith("
         "('exactly_once.local', 'pyspark', 'great_expectations'))))"],
        capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["0", "[]"], result.stdout + result.stderr


def test_every_setting_that_differs_between_targets_is_a_bundle_variable(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(PROJECT_ROOT / "conf", conf)
    prod = conf / "targets" / "prod.yml"
    prod.write_text(prod.read_text().replace("starting_offsets: earliest",
                                             "starting_offsets: latest"))
    with pytest.raises(ValueError, match="exactly_once.kafka.starting_offsets differs"):
        bundle_resource.pipeline_configuration(conf_dir=conf)


@pytest.mark.parametrize("old, new, message", [
    ("      kafka_bootstrap_servers: kafka-prod.example.com:9093\n", "",
     "target prod sets kafka_bootstrap_servers=None"),
    ("      orders_watermark_delay: 10 minutes\n", "      orders_watermark_delay: 1 hour\n",
     "target dev sets orders_watermark_delay='1 hour', conf/targets/dev.yml gives '10 minutes'"),
    ("      catalog: main\n", "", "target dev does not set variable catalog"),
])
def test_bundle_variables_must_match_the_conf_targets(tmp_path, old, new, message):
    copy = tmp_path / "databricks.yml"
    text = bundle_resource.BUNDLE_FILE.read_text()
    assert old in text
    copy.write_text(text.replace(old, new, 1))
    found = bundle_resource.problems(bundle_file=copy)
    assert any(message in p for p in found), found


def test_no_secret_values_in_deployment_files():
    files = [bundle_resource.BUNDLE_FILE, *sorted((PROJECT_ROOT / "resources").glob("*.yml")),
             DBX_DEPLOYMENT, *sorted((PROJECT_ROOT / "conf").rglob("*.yml"))]
    for path in files:
        text = path.read_text().lower()
        for word in ("password:", "sasl.jaas.config", "token:", "dapi"):
            assert word not in text, f"{path}: {word}"
