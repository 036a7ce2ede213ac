"""A bundle's resources and mutators written in Python (`python:` in databricks.yml, the
databricks-bundles package), run as the Databricks CLI runs them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from bundle_files import (
    BASE,
    a_bundle,
    pipeline_yml,
    refused,
    the_user,  # noqa: F401 - autouse: every test runs as the same workspace user
)

from exactly_once.bundle import load_bundle

PYDABS_RESOURCES = """
from databricks.bundles.core import Bundle, Resources, Variable, variables
from databricks.bundles.pipelines import Pipeline


@variables
class Vars:
    catalog: Variable[str]


def load_resources(bundle: Bundle) -> Resources:
    resources = Resources()
    resources.add_pipeline("etl", Pipeline.from_dict({
        "name": f"etl_{bundle.target}",
        "catalog": bundle.resolve_variable(Vars.catalog),
        "schema": "${workspace.current_user.short_name}",
        "root_path": "src",
        "libraries": [{"glob": {"include": "src/*.sql"}}],
    }))
    return resources
"""

PYDABS_MUTATORS = """
from dataclasses import replace

from databricks.bundles.core import Bundle, pipeline_mutator
from databricks.bundles.pipelines import Pipeline


@pipeline_mutator
def add_configuration(bundle: Bundle, pipeline: Pipeline) -> Pipeline:
    return replace(pipeline, configuration={**(pipeline.configuration or {}), "tagged": "yes"})
"""


def test_resources_and_mutators_written_in_python_run_as_the_cli_runs_them(tmp_path):
    """The `pydabs` template's bundle declares its pipeline in Python (`python.resources`); the
    Databricks CLI runs it with the databricks-bundles package (in `python.venv_path`), then
    the mutators, which may change YAML pipelines too. Paths in Python resources are relative
    to the bundle's folder."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the suite's Python has the package
    python = ("python:\n  venv_path: .venv\n  resources:\n    - 'resources:load_resources'\n"
              "  mutators:\n    - 'mutators:add_configuration'\n")
    root = a_bundle(tmp_path, pipeline_yml("name: p\nlibraries:\n  - file:\n      path: "
                                           "../src/a.py\n"), base=BASE + python,
                    **{"resources/__init__.py": PYDABS_RESOURCES,
                       "mutators.py": PYDABS_MUTATORS})
    bundle = load_bundle(root)
    assert sorted(bundle.pipelines) == ["etl", "p"]
    etl = bundle.pipeline("etl")
    assert (etl.name, etl.catalog, etl.schema, etl.root_path) == (
        "[dev ci] etl_dev", "main", "ci", tmp_path / "src")
    assert [str(library) for library in etl.libraries] == [f"{tmp_path}/src/b.sql"]
    assert etl.configuration == {"tagged": "yes"}
    p = bundle.pipeline("p")  # written in YAML, changed by the mutator
    assert ([str(library) for library in p.libraries], p.configuration) == (
        [f"{tmp_path}/src/a.py"], {"tagged": "yes"})
    assert "python" not in bundle.ignored


def test_python_resources_that_fail_are_one_line(tmp_path):
    python = "python:\n  venv_path: .venv\n  resources:\n    - 'resources:load_resources'\n"
    root = a_bundle(tmp_path, pipeline_yml("name: p\n"), base=BASE + python,
                    **{"resources/__init__.py": "def load_resources(bundle):\n"
                                                "    raise ValueError('no catalog here')\n"})
    assert refused(root) == (f"{tmp_path}/databricks.yml:11: python.venv_path: `.venv` has no "
                             f"Python ({tmp_path}/.venv/bin/python); create it with the "
                             "bundle's dependencies, databricks-bundles among them (`uv sync`, "
                             "as Databricks' templates do)")
    # A Python without the package: the suite's own, with no site-packages.
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (tmp_path / ".venv" / "bin" / "python").chmod(0o755)
    assert refused(root) == (f"{tmp_path}/databricks.yml:13: python.resources: "
                             f"{tmp_path}/.venv/bin/python has no databricks-bundles package, "
                             "which runs resources written in Python (pip install "
                             "databricks-bundles)")
    shutil.rmtree(tmp_path / ".venv")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    message = refused(root)
    assert message.startswith(f"{tmp_path}/databricks.yml:13: python.resources: ")
    assert message.endswith("ValueError: no catalog here")
    # A venv alone changes nothing locally: shown by dry-run as without local meaning.
    venv = a_bundle(tmp_path / "venv", pipeline_yml("name: p\n"),
                    base=BASE + "python:\n  venv_path: .venv\n")
    assert load_bundle(venv).ignored["python"] == {"venv_path": ".venv"}
