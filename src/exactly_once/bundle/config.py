"""A bundle's configuration tree: its root file, the files `include` adds, merged, with the
selected target's overrides merged on top, as the Databricks CLI builds it (bundle/config/
loader, mutator/select_target.go, root.go's MergeTargetOverrides, libs/dyn/merge):

- the root file is `databricks.yml`, `databricks.yaml`, `bundle.yml` or `bundle.yaml` (two in
  one folder is an error); without a folder given, `DATABRICKS_BUNDLE_ROOT`, else the current
  folder and its parents;
- `include` globs are relative to the bundle root, matched per entry in sorted order, a file
  once; a plain path that matches nothing is an error, and so is a matched file that is not
  YAML or JSON; an `include` outside the root file is ignored by the CLI (a warning), here too;
- files merge in that order: mappings key by key, sequences concatenated, a scalar replaced by
  the later one; a resource key defined in two files is an error;
- the older `environments:` is `targets:`; no targets at all is one target named `default`;
- the target: the one named, the one with `default: true`, or the only one; its `bundle`,
  `workspace`, `artifacts`, `resources`, `sync`, `permissions` and `presets` merge over the
  top-level ones, its `mode` and `run_as` replace them; its `variables` set a variable's
  default (a bare value is shorthand for `default:`), or its lookup.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly_once.bundle.yaml_files import NOWHERE, LList, LMap, LStr, load_yaml, located_file
from exactly_once.errors import BundleError

ROOT_FILES = ("databricks.yml", "databricks.yaml", "bundle.yml", "bundle.yaml")
BUNDLE_ROOT_ENV = "DATABRICKS_BUNDLE_ROOT"
DEFAULT_TARGET = "default"  # the CLI's name for the target of a bundle that defines none
MODES = ("development", "production")
# What a target may hold besides `variables`, `mode`, `default` (root.go, target.go).
TARGET_MERGED = ("bundle", "workspace", "artifacts", "resources", "sync", "permissions",
                 "presets")
TARGET_REPLACED = ("run_as",)


@dataclass(frozen=True)
class Config:
    """The merged configuration of one target: `tree` is the whole YAML tree (its values
    located), `root_file` the root configuration file, `files` every file read, in order."""

    root: Path
    root_file: Path
    files: tuple[Path, ...]
    target: str
    mode: str | None
    tree: LMap


def find_root_file(folder: Path) -> Path | None:
    """The bundle's root configuration file in `folder`, None when it has none."""
    found = [folder / name for name in ROOT_FILES if (folder / name).is_file()]
    if len(found) > 1:
        raise BundleError(f"{located_file(folder)}: several bundle configuration files "
                          f"({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def nearest_root(start: Path) -> Path | None:
    """`start` or the nearest folder above it holding a bundle configuration file; None when
    none does."""
    return next((f for f in (start, *start.parents) if find_root_file(f) is not None), None)


def bundle_root(start: Path | None) -> Path:
    """The bundle's root folder: `start` itself when given; else `DATABRICKS_BUNDLE_ROOT` when
    set; else the current folder or the nearest parent holding a bundle configuration file."""
    if start is not None:
        folder = start.resolve()
        if not folder.is_dir():
            raise BundleError(f"{located_file(folder)}: no such folder (the bundle's root)")
        if find_root_file(folder) is None:
            raise BundleError(f"{located_file(folder)}: no databricks.yml (nor "
                              f"{', '.join(ROOT_FILES[1:])}) in this folder")
        return folder
    from_env = os.environ.get(BUNDLE_ROOT_ENV)
    if from_env:
        folder = Path(from_env).resolve()
        if not folder.is_dir() or find_root_file(folder) is None:
            raise BundleError(f"{BUNDLE_ROOT_ENV}={from_env}: not a folder holding a "
                              f"databricks.yml")
        return folder
    here = Path.cwd().resolve()
    for name in ROOT_FILES:  # the CLI looks for each name in turn, all the way up
        for folder in (here, *here.parents):
            if (folder / name).is_file():
                find_root_file(folder)  # two root files in one folder is an error
                return folder
    raise BundleError(f"no databricks.yml in {here} or any folder above it (nor "
                      f"{', '.join(ROOT_FILES[1:])}); run in a bundle's folder or pass its "
                      f"folder")


def load_config(root: Path, target: str | None) -> Config:
    """The configuration of bundle `root` (a folder holding its root file) for `target`."""
    root_file = find_root_file(root)
    assert root_file is not None  # bundle_root checked
    tree = load_yaml(root_file)
    files = [root_file]
    seen_keys = _resource_keys(tree, {})
    for file in _included_files(root, tree):
        included = load_yaml(file)
        included.pop("include", None)  # only the root file's includes apply (CLI: a warning)
        seen_keys = _resource_keys(included, seen_keys)
        tree = _merge_at(tree, included, "")
        files.append(file)
    tree = _environments_as_targets(tree)
    name = select_target(tree, target, root_file)
    tree, mode = _merge_target(tree, name)
    return Config(root, root_file, tuple(files), name, mode, tree)


def _included_files(root: Path, tree: LMap) -> list[Path]:
    """The files the root file's `include` names, in the CLI's order."""
    include = tree.get("include") or []
    if not isinstance(include, list):
        raise BundleError(f"{_where(include, tree)}: include: a list of paths or globs")
    if glob.has_magic(str(root)):
        raise BundleError(f"{located_file(root)}: the bundle's folder has a glob character "
                          f"in its path, which the Databricks CLI refuses")
    found: list[Path] = []
    for entry in include:
        where = _where(entry, tree)
        if not isinstance(entry, str) or os.path.isabs(entry):
            raise BundleError(f"{where}: include: `{entry}`: includes are relative paths")
        # Go's filepath.Glob: `*` never crosses a `/`, `**` is `*` (no recursion).
        matches = sorted(glob.glob(os.path.join(root, entry), recursive=False))
        if not matches and not glob.has_magic(entry):
            raise BundleError(f"{where}: include: `{entry}` does not match any file")
        for match in matches:
            path = Path(os.path.normpath(match))
            if path.name in ROOT_FILES and path.parent == root or path in found:
                continue
            if path.suffix not in (".yml", ".yaml", ".json"):
                raise BundleError(f"{where}: include: `{entry}` matches "
                                  f"{path.relative_to(root)}, which is not a YAML or JSON "
                                  f"file (files to sync go in `sync.include`)")
            found.append(path)
    return found


def _resource_keys(tree: LMap, seen: dict[tuple[str, str], Path]) -> dict[tuple[str, str], Path]:
    """`seen` with the top-level resource keys of `tree`; a key already seen in another file is
    an error (the CLI's validate.UniqueResourceKeys)."""
    resources = tree.get("resources")
    if not isinstance(resources, dict):
        return seen
    out = dict(seen)
    for kind, defined in resources.items():
        for key in defined or {}:
            earlier = out.get((kind, key))
            if earlier is not None and earlier != tree.file:
                raise BundleError(f"{_where(key, defined)}: resources.{kind}.{key}: defined "
                                  f"in {located_file(earlier)} too; a resource key is "
                                  f"defined once")
            out[(kind, key)] = tree.file
    return out


def merge(a: Any, b: Any, path: str = "") -> Any:
    """`b` merged over `a` as the CLI merges configuration (libs/dyn/merge): mappings key by
    key, sequences concatenated, a scalar replaced; null yields to the other value; a mapping
    over a scalar (or two scalars of different types) is an error naming `path`."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict):
        if not isinstance(b, dict):
            raise _merge_error(a, b, path)
        out = LMap(a, file=getattr(a, "file", Path()), line=getattr(a, "line", 0))
        for key, value in b.items():
            out[key] = merge(out[key], value, f"{path}.{key}".lstrip(".")) if key in out \
                else value
        return out
    if isinstance(a, list):
        if not isinstance(b, list):
            raise _merge_error(a, b, path)
        return LList([*a, *b], file=getattr(a, "file", Path()), line=getattr(a, "line", 0))
    if isinstance(b, (dict, list)) or _kind(a) != _kind(b):
        raise _merge_error(a, b, path)
    return b


def _merge_at(tree: LMap, other: LMap, path: str) -> LMap:
    merged = merge(tree, other, path)
    assert isinstance(merged, LMap)
    return merged


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "sequence"
    return "string"


def _merge_error(a: Any, b: Any, path: str) -> BundleError:
    return BundleError(f"{_where(b, a)}: {path}: cannot merge {_kind(a)} with {_kind(b)} "
                       f"(a target or included file sets it as another type)")


def _where(value: Any, parent: Any) -> str:
    for candidate in (value, parent):
        if isinstance(candidate, (LStr, LMap, LList)):
            return candidate.where()
    return "?"


def _environments_as_targets(tree: LMap) -> LMap:
    if "environments" not in tree:
        return tree
    if "targets" in tree:
        raise BundleError(f"{_where(tree['environments'], tree)}: both `environments` and "
                          f"`targets` are set; keep `targets`")
    out = LMap(tree, file=tree.file, line=tree.line)
    out["targets"] = out.pop("environments")
    return out


def targets_of(tree: LMap) -> dict[str, Any]:
    """The bundle's targets by name (one named `default` when it defines none)."""
    targets = tree.get("targets")
    if targets is None:
        return {DEFAULT_TARGET: None}
    if not isinstance(targets, dict):
        raise BundleError(f"{_where(targets, tree)}: targets: a mapping of target names")
    return dict(targets) or {DEFAULT_TARGET: None}


def select_target(tree: LMap, name: str | None, root_file: Path) -> str:
    """The target to use: `name`, else the one marked `default: true`, else the only one."""
    targets = targets_of(tree)
    listed = ", ".join(targets)
    if name is not None:
        if name not in targets:
            raise BundleError(f"{located_file(root_file)}: targets: no target `{name}`; the "
                              f"bundle's targets: {listed}")
        return name
    if len(targets) == 1:
        return next(iter(targets))
    defaults = [key for key, body in targets.items()
                if isinstance(body, dict) and body.get("default") is True]
    if len(defaults) > 1:
        raise BundleError(f"{located_file(root_file)}: targets: several are marked "
                          f"`default: true` ({', '.join(defaults)})")
    if not defaults:
        raise BundleError(f"{located_file(root_file)}: targets: none is marked "
                          f"`default: true`; name one of {listed}")
    return defaults[0]


def _merge_target(tree: LMap, name: str) -> tuple[LMap, str | None]:
    """`tree` with target `name`'s overrides merged in, and the bundle's mode."""
    target = targets_of(tree).get(name) or LMap(file=tree.file, line=tree.line)
    if not isinstance(target, dict):
        raise BundleError(f"{_where(target, tree)}: targets.{name}: a mapping")
    out = LMap(tree, file=tree.file, line=tree.line)
    out.pop("targets", None)
    out.pop("environments", None)
    for key in TARGET_MERGED:
        if key in target:
            out[key] = merge(out.get(key), target[key], key)
    for key in TARGET_REPLACED:
        if key in target:
            out[key] = target[key]
    if "variables" in target:
        out["variables"] = _target_variables(out.get("variables"), target["variables"], name)
    bundle = out.get("bundle")
    bundle = LMap(bundle or {}, file=getattr(bundle, "file", tree.file),
                  line=getattr(bundle, "line", 0))
    for key in ("mode", "cluster_id", "compute_id"):
        if key in target:
            bundle[key] = target[key]
    if "git" in target:
        bundle["git"] = merge(bundle.get("git"), target["git"], "bundle.git")
    bundle["target"] = LStr(name, tree.file)
    bundle["environment"] = LStr(name, tree.file)  # the older name of `target`, still resolved
    out["bundle"] = bundle
    mode = bundle.get("mode")
    if mode is not None and mode not in MODES:
        raise BundleError(f"{_where(mode, target)}: targets.{name}.mode: `{mode}` is not a "
                          f"mode; use {' or '.join(MODES)}")
    return out, (str(mode) if mode is not None else None)


def _target_variables(defined: Any, overrides: Any, target: str) -> LMap:
    """The top-level `variables` with target `target`'s values: a bare value (or a mapping of a
    complex variable) is the variable's `default`; `default:` or `lookup:` replace the other."""
    if not isinstance(overrides, dict):
        raise BundleError(f"{_where(overrides, defined)}: targets.{target}.variables: a "
                          f"mapping of variable names")
    out = LMap(defined or {}, file=getattr(defined, "file", getattr(overrides, "file", NOWHERE)),
               line=getattr(defined, "line", 0))
    for name, value in overrides.items():
        if name not in out:
            raise BundleError(f"{_where(value, overrides)}: targets.{target}.variables.{name}: "
                              f"variable `{name}` is not defined but is assigned a value "
                              f"(declare it under the top-level `variables`)")
        original = out[name] if isinstance(out[name], dict) else {}
        variable = LMap(original, file=getattr(out[name], "file", out.file),
                        line=getattr(out[name], "line", 0))
        if _is_full_override(value):
            if "default" in value:
                variable["default"] = value["default"]
                variable.pop("lookup", None)
            if "lookup" in value:
                variable["lookup"] = value["lookup"]
                variable.pop("default", None)
        else:
            variable["default"] = value
        out[name] = variable
    return out


# The shapes of a target's full variable definition (root.go's allowedVariableDefinitions).
_FULL_OVERRIDES = ({"default"}, {"lookup"}, {"description", "default"},
                   {"description", "lookup"}, {"type", "default"},
                   {"type", "default", "description"})


def _is_full_override(value: Any) -> bool:
    return isinstance(value, dict) and set(value) in _FULL_OVERRIDES
