"""A bundle's variables and where each gets its value, highest first, as the Databricks CLI
assigns them (bundle/config/mutator/set_variables.go, root.go's InitializeVariables):

1. `--var name=value` (`variables` of `load_bundle`);
2. the environment variable `BUNDLE_VAR_<name>`;
3. a `lookup` (of a cluster, a warehouse... by name): it needs a workspace, so it has no local
   value; a reference to it is an error saying how to give one (1 or 2);
4. `.databricks/bundle/<target>/variable-overrides.json` in the bundle's folder;
5. the `default` (the target's, which replaces the top-level one).

A variable with none of these is an error naming it. A complex variable (`type: complex`) takes
a mapping or list, and is given no value by `--var` or the environment (the CLI refuses both).
A value may hold references (`${workspace.current_user.short_name}`); they are resolved where
the variable is used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly_once.bundle.yaml_files import LMap, LStr, located_file, location_of
from exactly_once.errors import BundleError

ENV_PREFIX = "BUNDLE_VAR_"


@dataclass(frozen=True)
class Variable:
    """A variable: its value as written (None for a lookup), where the value comes from
    (`--var`, `BUNDLE_VAR_<name>`, `lookup`, the overrides file or `default`), and where the
    variable is declared."""

    name: str
    value: Any
    source: str
    complex: bool
    lookup: Any
    declared: str


def overrides_file(root: Path, target: str) -> Path:
    return root / ".databricks" / "bundle" / target / "variable-overrides.json"


def assign(tree: LMap, root: Path, target: str,
           given: Mapping[str, str] | None) -> dict[str, Variable]:
    """Every declared variable with its value, or an error naming the first without one."""
    declared = tree.get("variables") or {}
    where = location_of(declared) or located_file(tree.file)
    if not isinstance(declared, dict):
        raise BundleError(f"{where}: variables: a mapping of variable names")
    given = dict(given or {})
    for name in given:
        if name not in declared:
            raise BundleError(f"--var {name}=...: variable `{name}` is not declared in the "
                              f"bundle (declared: {', '.join(declared) or 'none'})")
    from_file = _overrides(root, target)
    out = {}
    for name, spec in declared.items():
        spec = spec if spec is not None else {}
        at = location_of(spec) or location_of(name) or where
        if not isinstance(spec, dict):
            raise BundleError(f"{at}: variables.{name}: a variable is a mapping (`default:`, "
                              f"`description:`, `type:`, `lookup:`)")
        complex_ = spec.get("type") == "complex"
        out[name] = _assigned(name, spec, complex_, at, given, from_file, root, target)
    return out


def _assigned(name: str, spec: Mapping[str, Any], complex_: bool, at: str,
              given: Mapping[str, str], from_file: Mapping[str, Any], root: Path,
              target: str) -> Variable:
    env = ENV_PREFIX + name
    lookup = spec.get("lookup")
    if name in given:
        if complex_:
            raise BundleError(f"--var {name}=...: variable `{name}` is complex; the CLI sets "
                              f"complex variables only in the bundle's files")
        return Variable(name, given[name], "--var", complex_, lookup, at)
    if env in os.environ:
        if complex_:
            raise BundleError(f"{env}: variable `{name}` is complex; the CLI sets complex "
                              f"variables only in the bundle's files")
        return Variable(name, os.environ[env], env, complex_, lookup, at)
    if lookup is not None:
        return Variable(name, None, "lookup", complex_, lookup, at)
    if from_file.get(name) is not None:
        value = from_file[name]
        _check_shape(name, value, complex_, located_file(overrides_file(root, target)))
        return Variable(name, value, "variable-overrides.json", complex_, lookup, at)
    if spec.get("default") is not None:
        value = spec["default"]
        _check_shape(name, value, complex_, location_of(value) or at)
        return Variable(name, value, "default", complex_, lookup, at)
    raise BundleError(f"{at}: variables.{name}: no value for variable `{name}` in target "
                      f"`{target}`; set its `default` (or the target's `variables`), or pass "
                      f"--var {name}=... or {env}")


def _check_shape(name: str, value: Any, complex_: bool, where: str) -> None:
    shaped = isinstance(value, (dict, list))
    if complex_ and not shaped:
        raise BundleError(f"{where}: variables.{name}: variable `{name}` is of type complex, "
                          f"but its value is not a mapping or list")
    if shaped and not complex_:
        raise BundleError(f"{where}: variables.{name}: a mapping or list value needs "
                          f"`type: complex` on variable `{name}`")


def _overrides(root: Path, target: str) -> Mapping[str, Any]:
    file = overrides_file(root, target)
    if not file.is_file():
        return {}
    try:
        values = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BundleError(f"{located_file(file)}: cannot be read as JSON: {err}") from None
    if not isinstance(values, dict):
        raise BundleError(f"{located_file(file)}: a JSON object of variable values "
                          f'({{"name": "value"}})')
    return {key: _located(value, file) for key, value in values.items()}


def _located(value: Any, file: Path) -> Any:
    if isinstance(value, str):
        return LStr(value, file)
    if isinstance(value, dict):
        return LMap({k: _located(v, file) for k, v in value.items()}, file=file)
    if isinstance(value, list):
        return [_located(v, file) for v in value]
    return value
