"""Bundles written for a test (tests/test_bundle_*.py): a bundle's files in a folder, the one-line
refusal a bad one gets, and the workspace user every such test runs as."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from exactly_once.bundle import load_bundle
from exactly_once.errors import BundleError

BUNDLES = Path(__file__).parent / "bundles"
USER = "ci@example.com"


@pytest.fixture(autouse=True)
def the_user(monkeypatch):
    monkeypatch.setenv("EXACTLY_ONCE_USER_NAME", USER)
    for name in ("DATABRICKS_BUNDLE_ROOT", "BUNDLE_VAR_currency", "BUNDLE_VAR_min_fare"):
        monkeypatch.delenv(name, raising=False)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def refused(root: Path | None = None, **kwargs) -> str:
    with pytest.raises(BundleError) as caught:
        load_bundle(root, **kwargs)
    assert "\n" not in str(caught.value)
    return str(caught.value)


BASE = """
bundle:
  name: b
targets:
  dev:
    default: true
    mode: development
variables:
  catalog:
    default: main
"""


def with_target(text: str) -> str:
    """BASE with `text` (a target, indented) in its `targets`."""
    return BASE.replace("targets:\n", "targets:\n" + text)


def a_bundle(tmp_path: Path, pipeline: str, base: str = BASE, **files: str) -> Path:
    return write(tmp_path, {"databricks.yml": base + "include:\n  - resources/*.yml\n",
                            "resources/p.pipeline.yml": pipeline,
                            "src/a.py": "x = 1\n", "src/b.sql": "SELECT 1;\n", **files})


def pipeline_yml(body: str) -> str:
    return "resources:\n  pipelines:\n    p:\n" + textwrap.indent(
        textwrap.dedent(body).lstrip("\n"), " " * 6)
