"""Databricks' own templates, as `databricks bundle init` writes them today (the pinned CLI's
`default-python`, `lakeflow-pipelines` and `pydabs`, rendered here against the stub workspace
the CLI asks for the user), run and tested locally as they are: their pipelines through
`exactly-once run`, and `default-python`'s own pytest suite (a conftest of Databricks Connect,
a test reading `samples.nyctaxi.trips` through `databricks.sdk.runtime.spark`) through the
plugin. The only files added are what a team adds: the `samples.nyctaxi.trips` fixture the
templates' `fixtures/` folder is for (and pydabs' `.venv`, the project's own environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from stub_workspace import CLI, cli_environment

from exactly_once import cli

TRIPS = Path(__file__).parent / "bundles" / "tested_taxis" / "fixtures" / \
    "samples.nyctaxi.trips.json"
PROJECT = "taxis_demo"


@pytest.fixture(scope="module")
def render(workspace, tmp_path_factory):
    """`render(template, language)`: the project `bundle init` writes, with the trips fixture."""
    home = tmp_path_factory.mktemp("home")
    env = cli_environment(workspace, home)

    def init(template: str, language: str) -> Path:
        out = tmp_path_factory.mktemp(f"{template}-{language}")
        answers = out / "answers.json"
        answers.write_text(json.dumps({
            "project_name": PROJECT, "default_catalog": "main", "personal_schemas": "yes",
            "language": language, "include_job": "yes", "include_pipeline": "yes",
            "include_python": "yes", "serverless": "yes"}))
        done = subprocess.run([str(CLI), "bundle", "init", template, "--config-file",
                               str(answers), "--output-dir", str(out)], env=env, cwd=out,
                              capture_output=True, text=True, timeout=120)
        root = out / PROJECT
        assert done.returncode == 0 and (root / "databricks.yml").is_file(), \
            done.stdout + done.stderr
        (root / "fixtures").mkdir(exist_ok=True)  # default-python's has a .gitkeep
        shutil.copy(TRIPS, root / "fixtures" / TRIPS.name)
        return root
    return init


def fares_by_zip() -> dict[int, float]:
    fares: dict[int, float] = defaultdict(float)
    for trip in json.loads(TRIPS.read_text()):
        fares[trip["pickup_zip"]] += trip["fare_amount"]
    return dict(fares)


@pytest.mark.parametrize(("template", "language"), [("default-python", "python"),
                                                    ("lakeflow-pipelines", "sql"),
                                                    ("pydabs", "python")])
def test_the_template_s_pipeline_runs_as_it_is(in_session, render, template, language,
                                               monkeypatch, capsys):
    root = render(template, language)
    if template == "pydabs":  # its resources are Python, run in the project's venv_path, .venv
        (root / ".venv").symlink_to(sys.prefix)
    monkeypatch.chdir(root)
    monkeypatch.setenv("EXACTLY_ONCE_USER_NAME", "ana.lee@example.com")
    suffix = ".py" if language == "python" else ".sql"
    assert {p.suffix for p in root.glob(f"src/{PROJECT}_etl/transformations/*")} == {suffix}
    assert cli.main(["dry-run"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "2 datasets, 2 flows; no problems" in out and "publishes to main.ana_lee" in out
    assert cli.main(["run", "--quiet"]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert cli.main(["show", f"main.ana_lee.sample_zones_{PROJECT}", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["pickup_zip"]: r["total_fare"] for r in rows} == pytest.approx(fares_by_zip())


def test_the_template_s_own_tests_pass_with_its_conftest_unchanged(render, workspace,
                                                                  tmp_path):
    """`pytest` in the project, as its README says to run it, with the plugin standing in for
    Databricks Connect. The conftest asks the SDK's WorkspaceClient for the compute before any
    test: a developer's profile answers it (here the stub's URL and a token); no test reaches
    it. `src` on the path, as the project's editable install puts it."""
    root = render("default-python", "python")
    env = {**cli_environment(workspace, tmp_path), "EXACTLY_ONCE_ENGINE": "off",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "src"),
                                                      os.environ.get("PYTHONPATH")]))}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    assert (root / "tests" / "sample_taxis_test.py").read_text().count("def test_") == 1
    assert "databricks.connect" in (root / "tests" / "conftest.py").read_text()
    assert not os.path.exists(root / ".local")  # the tests' catalog is the session's own
