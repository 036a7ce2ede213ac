"""Resources written in Python: a bundle's `python.resources` (functions that return resources)
and `python.mutators` (functions that change them), run as the Databricks CLI runs them.

The CLI hands the bundle's configuration, as JSON, to the `databricks-bundles` package in the
bundle's Python (`python.venv_path`, else `python3` on PATH): `python -m databricks.bundles.build
--phase load_resources`, then `--phase apply_mutators`, each writing the configuration back
with the resources added or changed, and its diagnostics. This module runs the same command in
the bundle's folder and reads the same files, so a bundle such as Databricks' `pydabs` template
has locally the pipelines it deploys. An error the functions report (or a Python without the
package) is one line. Paths in resources made in Python are relative to the bundle's folder, as
the CLI reads them; their values are located at the `python` section that names the functions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from exactly_once.bundle.pipelines import plain
from exactly_once.bundle.yaml_files import LList, LMap, LStr, location_of
from exactly_once.errors import BundleError

# Where a bundle names its Python: the `python` section, and the `experimental` names it had
# before (`databricks-bundles` itself refuses `experimental.pydabs`, in its own words).
SECTIONS = (("python",), ("experimental", "python"), ("experimental", "pydabs"))
PHASES = (("resources", "load_resources"), ("mutators", "apply_mutators"))
TIMEOUT_SECONDS = 300


def declared(tree: LMap) -> tuple[str, Any] | None:
    """The first section that names functions (`resources` or `mutators`): its dotted path and
    its value; None for a bundle without Python resources."""
    for path in SECTIONS:
        section: Any = tree
        for key in path:
            section = section.get(key) if isinstance(section, dict) else None
        if isinstance(section, dict) and any(section.get(kind) for kind, _ in PHASES):
            return ".".join(path), section
    return None


def apply(tree: LMap, found: tuple[str, Any], root: Path, target: str,
          variables: Mapping[str, Any]) -> LMap:
    """`tree` with the resources its Python functions add and change; `found` is `declared`'s
    answer for it. `variables`: each variable's value, as the functions read them
    (`bundle.variables`)."""
    name, section = found
    python = _python(section, name, root)
    config: Any = plain(tree)
    config.setdefault("bundle", {})["target"] = target
    config["variables"] = {key: {**(config.get("variables") or {}).get(key, {}), "value": value}
                           for key, value in variables.items()}
    for kind, phase in PHASES:
        if section.get(kind):
            config = _run(python, phase, config, root, f"{name}.{kind}", section[kind])
    return _merged(tree, config.get("resources") or {}, _anchor(section, root))


def _merged(tree: LMap, resources: Mapping[str, Any], here: tuple[Path, int]) -> LMap:
    """`tree` with `resources`, each value the functions left as the YAML wrote it keeping its
    file and line (a relative path stays relative to its file), as the CLI keeps them."""
    out = LMap(tree, file=tree.file, line=tree.line)
    out["resources"] = _kept(tree.get("resources"), resources, here)
    return out


def _kept(before: Any, after: Any, here: tuple[Path, int]) -> Any:
    """`after`, with `before`'s located values wherever they are equal; new values `here`."""
    if before is not None and plain(before) == after:
        return before
    if isinstance(after, dict) and isinstance(before, dict):
        return LMap(((key, _kept(before.get(key), value, here)) for key, value in after.items()),
                    file=getattr(before, "file", here[0]), line=getattr(before, "line", 0))
    if isinstance(after, list) and isinstance(before, list):
        return LList((_kept(before[i] if i < len(before) else None, value, here)
                      for i, value in enumerate(after)),
                     file=getattr(before, "file", here[0]), line=getattr(before, "line", 0))
    return _located(after, here)


def _python(section: Mapping[str, Any], name: str, root: Path) -> str:
    venv = section.get("venv_path")
    if not venv:
        return shutil.which("python3") or sys.executable
    python = root / str(venv) / "bin" / "python"
    if not python.exists():
        raise BundleError(f"{location_of(venv) or root}: {name}.venv_path: `{venv}` has no "
                          f"Python ({python}); create it with the bundle's dependencies, "
                          "databricks-bundles among them (`uv sync`, as Databricks' templates do)")
    return str(python)


def _run(python: str, phase: str, config: Any, root: Path, key: str, functions: Any) -> Any:
    where = location_of(functions[0] if isinstance(functions, list) and functions
                        else functions) or str(root)
    with tempfile.TemporaryDirectory(prefix="bundle-python-") as work:
        files = {part: Path(work) / f"{part}.json" for part in ("input", "output", "diagnostics")}
        files["input"].write_text(json.dumps(config))
        try:
            done = subprocess.run(
                [python, "-m", "databricks.bundles.build", "--phase", phase,
                 *(arg for part, path in files.items() for arg in (f"--{part}", str(path)))],
                cwd=root, capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        except (OSError, subprocess.TimeoutExpired) as err:
            raise BundleError(f"{where}: {key}: {python} could not run them: {err}") from None
        if "databricks.bundles.build" in done.stderr and "No module named" in done.stderr:
            raise BundleError(f"{where}: {key}: {python} has no databricks-bundles package, "
                              "which runs resources written in Python (pip install "
                              "databricks-bundles)")
        errors = [d for d in _diagnostics(files["diagnostics"]) if d.get("severity") == "error"]
        if errors:
            first = errors[0]
            detail = (first.get("detail") or "").strip().splitlines()
            raise BundleError(f"{where}: {key}: {first.get('summary', 'failed')}"
                              + (f": {detail[-1]}" if detail else ""))
        if done.returncode != 0 or not files["output"].exists():
            tail = [line for line in done.stderr.splitlines() if line.strip()][-1:]
            raise BundleError(f"{where}: {key}: `python -m databricks.bundles.build --phase "
                              f"{phase}` failed ({' '.join(tail) or done.returncode})")
        return json.loads(files["output"].read_text())


def _diagnostics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _anchor(section: Any, root: Path) -> tuple[Path, int]:
    """Where values made in Python are located: a file in the bundle's folder (their paths are
    relative to it), at the line of the section that names the functions."""
    line = section.line if isinstance(section, LMap) else 0
    return root / "databricks.yml", line


def _located(value: Any, here: tuple[Path, int]) -> Any:
    file, line = here
    if isinstance(value, dict):
        return LMap(((key, _located(item, here)) for key, item in value.items()),
                    file=file, line=line)
    if isinstance(value, list):
        return LList((_located(item, here) for item in value), file=file, line=line)
    if isinstance(value, str):
        return LStr(value, file, line)
    return value
