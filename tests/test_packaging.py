"""What installing the package pulls in, wherever it is installed.

On Databricks the pipeline's environment installs the package without extras (`--editable`), so
its core requirements must be exactly what the pipeline imports there, minus what the runtime
brings (Spark, Delta, the Databricks SDK).
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

from exactly_once.paths import PIPELINES_DIR, PROJECT_ROOT

DISTRIBUTION = "exactly-once-lakehouse"
PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
# Modules the Databricks runtime provides to every pipeline.
RUNTIME_MODULES = {"pyspark", "delta", "databricks"}
SRC = PROJECT_ROOT / "src"


def _name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def _installed_requirements() -> list[Requirement]:
    return [Requirement(r) for r in importlib.metadata.requires(DISTRIBUTION) or []]


def test_installed_metadata_is_this_pyproject():
    """The checks below read what pip installed; a stale install would make them meaningless."""
    declared = set(PYPROJECT["dependencies"])
    for extra, requirements in PYPROJECT["optional-dependencies"].items():
        declared |= {f'{r}; extra == "{extra}"' for r in requirements}
    installed = {str(r) for r in _installed_requirements()}
    assert installed == {str(Requirement(r)) for r in declared}, \
        "the installed package is older than pyproject.toml: run `make setup`"


def test_core_requirements_hold_no_quality_tooling_and_no_spark():
    core = {r.name.lower() for r in _installed_requirements() if r.marker is None}
    assert core, "no core requirements at all: the metadata was not read"
    assert not core & {"great-expectations", "pandas", "jinja2", "pyspark", "delta-spark"}, core


def test_the_quality_extra_brings_great_expectations():
    quality = {_name(r) for r in PYPROJECT["optional-dependencies"]["quality"]}
    assert {"great-expectations", "pandas"} <= quality
    dev = PYPROJECT["optional-dependencies"]["dev"]
    assert {"local", "quality"} <= _dev_extras() and any(_name(r) == "mypy" for r in dev)


def _dev_extras() -> set[str]:
    """The project's own extras that `dev` (what `make setup` installs) includes."""
    return {extra for r in PYPROJECT["optional-dependencies"]["dev"]
            if _name(r) == DISTRIBUTION for extra in Requirement(r).extras}


def test_the_docs_extra_brings_the_site_generator_pinned_and_dev_includes_it():
    """`make test` installs `dev`, and the suite builds the site (test_docs.py)."""
    docs = [Requirement(r) for r in PYPROJECT["optional-dependencies"]["docs"]]
    assert {r.name for r in docs} == {"mkdocs", "mkdocs-material"}
    assert all(str(r.specifier).startswith("==") for r in docs), docs
    assert "docs" in _dev_extras()


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def pipeline_imports() -> set[str]:
    """Top-level names of the third-party modules the pipeline files import, directly or through
    the project's own modules."""
    todo = sorted(PIPELINES_DIR.glob("*.py"))
    seen: set[Path] = set()
    third_party = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in _imports(path):
            if module.split(".")[0] != "exactly_once":
                third_party.add(module.split(".")[0])
                continue
            # The module, and the packages above it, whose __init__ runs first.
            parts = module.split(".")
            for depth in range(1, len(parts) + 1):
                base = SRC.joinpath(*parts[:depth])
                todo += [p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()]
    return third_party - set(sys.stdlib_module_names)


def test_core_requirements_are_what_the_pipeline_imports():
    imported = pipeline_imports()
    assert "pyspark" in imported and "yaml" in imported, imported  # the walk found the imports
    distributions = importlib.metadata.packages_distributions()
    needed = {distributions[m][0].lower() for m in imported - RUNTIME_MODULES}
    core = {_name(r) for r in PYPROJECT["dependencies"]}
    assert core == needed


def test_databricks_installs_no_spark_of_its_own():
    """The bundle installs the package into Databricks environments, whose runtime has Spark."""
    names = {_name(dep) for dep in PYPROJECT["dependencies"]}
    assert not {"pyspark", "delta-spark"} & names


def test_the_local_extra_pins_the_runtime():
    local = PYPROJECT["optional-dependencies"]["local"]
    assert "pyspark[pipelines]==4.2.0" in local and "delta-spark==4.4.1" in local


def test_the_modules_an_update_imports_are_byte_compiled():
    """`make setup` leaves byte-code for the environment and src/: where PYTHONDONTWRITEBYTECODE
    is set (this machine; CI's figures say it too), Python never writes it at import, and every
    process compiled the ~700 modules an update imports again (about 6 s of an `exactly-once
    run`, BENCHMARKS.md). A module added or changed since is compiled by the next set-up.
    Checked in a process of its own, as such a process imports them."""
    script = (
        "import os, sys\n"
        "import exactly_once.cli.run, exactly_once.local.execution.pipeline, delta, pyspark.sql\n"
        "missing = sorted(m.__name__ for m in list(sys.modules.values())\n"
        "    if (getattr(m, '__file__', None) or '').endswith('.py')\n"
        "    and getattr(m, '__cached__', None) and not os.path.exists(m.__cached__))\n"
        "print(len(missing), missing[:10])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.stdout.startswith("0 "), f"modules imported without byte-code: {done.stdout}"
