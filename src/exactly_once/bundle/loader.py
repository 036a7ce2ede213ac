"""`load_bundle`: a Databricks Asset Bundle's pipelines for one target, read as the Databricks
CLI reads them (config.py: files and targets; variables.py; references.py; pipelines.py).

What references mean locally:

- `${bundle.name}`, `${bundle.target}` (and the older `${bundle.environment}`),
  `${bundle.mode}`, any other `bundle` setting; `${bundle.git.branch|commit|origin_url}` from
  the bundle folder's git repository ("" outside one), as the CLI loads them;
- `${workspace.current_user.*}`: the local user (current_user.py);
- `${workspace.file_path}`: the folder the bundle syncs (its own, or the one holding it and
  every `sync.paths` entry, `_sync_root`). On Databricks it is where those files are synced
  (`<root_path>/files`); locally the files are where they are, as with the CLI's source-linked
  deployments, which also resolve it to the local folder. A path built on it names a file of
  the bundle (pipelines.py);
- `${workspace.root_path}`: the workspace folder the CLI would deploy to (`workspace.root_path`
  as set, `~/` being `/Workspace/Users/<userName>/`, else
  `/Workspace/Users/<userName>/.bundle/<bundle name>/<target>`), and `resource_path`,
  `artifact_path`, `state_path` below it: text with no local meaning, for settings that show it;
- `${resources.<type>.<key>.<field>}`: the field as configured (a pipeline's or schema's
  `name` with the target's name prefix, as deployed: in development mode a schema
  `example` is `dev_<short_name>_example`); a field that exists only once deployed (`id`,
  `url`) is an error where it has a local meaning.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exactly_once.bundle import python_resources
from exactly_once.bundle.config import Config, bundle_root, load_config
from exactly_once.bundle.current_user import current_user, normalized
from exactly_once.bundle.pipelines import PipelineResource, Presets, build_pipeline, plain
from exactly_once.bundle.references import Deployed, Found, Missing, NoLocalValue, Resolver
from exactly_once.bundle.variables import Variable, assign
from exactly_once.bundle.yaml_files import LMap, LStr, located_file
from exactly_once.errors import BundleError

# Fields of `bundle` and `workspace` the CLI resolves to "" when not set (its typed
# configuration's empty values).
_BUNDLE_EMPTY = ("uuid", "cluster_id", "compute_id", "databricks_cli_version", "mode")
_WORKSPACE_EMPTY = ("host", "profile", "auth_type", "account_id", "workspace_id")
_GIT = ("branch", "commit", "origin_url", "actual_branch", "bundle_root_path")
# Top-level sections with no local meaning, reported in `Bundle.ignored` when set.
_IGNORED_SECTIONS = ("permissions", "run_as", "artifacts", "sync", "presets", "experimental",
                     "scripts", "python")


@dataclass(frozen=True)
class Bundle:
    """A bundle for one target: `variables` resolved (a complex variable's value is its YAML
    value), `pipelines` its pipeline resources by key, and `ignored` the settings with no
    local meaning (workspace, permissions, other resource types, lookup variables...), each
    resolved where it can be, for `dry-run` to show."""

    root: Path
    name: str
    target: str
    mode: str | None
    variables: Mapping[str, Any]
    pipelines: Mapping[str, PipelineResource]
    ignored: Mapping[str, object] = field(default_factory=dict)
    files: tuple[Path, ...] = ()

    def pipeline(self, key: str | None = None) -> PipelineResource:
        """Pipeline `key`; without a key, the bundle's only pipeline."""
        keys = ", ".join(self.pipelines) or "none"
        if key is None:
            if len(self.pipelines) == 1:
                return next(iter(self.pipelines.values()))
            if not self.pipelines:
                raise BundleError(f"{located_file(self.files[0] if self.files else self.root)}"
                                  f": resources.pipelines: the bundle defines no pipeline")
            raise BundleError(f"{located_file(self.files[0] if self.files else self.root)}: "
                              f"resources.pipelines: the bundle has several pipelines; name "
                              f"one of {keys}")
        if key not in self.pipelines:
            raise BundleError(f"{located_file(self.files[0] if self.files else self.root)}: "
                              f"resources.pipelines: no pipeline `{key}`; the bundle's "
                              f"pipelines: {keys}")
        return self.pipelines[key]


def load_bundle(root: Path | None = None, target: str | None = None,
                variables: Mapping[str, str] | None = None) -> Bundle:
    """The bundle in folder `root` (None: the current folder or the nearest one above it with
    a `databricks.yml`) for `target` (None: the default target), `variables` being
    `--var name=value` values."""
    folder = bundle_root(root)
    config = load_config(folder, target)
    tree = config.tree
    bundle_section = tree.get("bundle") or {}
    name = bundle_section.get("name")
    if not isinstance(name, str) or not name:
        raise BundleError(f"{located_file(config.root_file)}: bundle.name: not set (every "
                          f"bundle has a name)")
    assigned = assign(tree, folder, config.target, variables)
    user = current_user()
    presets = _presets(tree, config.mode, user["short_name"])
    resolver = Resolver(_Lookup(config, assigned, user, presets).find)
    resolved_variables = {
        key: plain(resolver.resolve(var.value, f"variables.{key}.value", keep_deployed=True))
        for key, var in assigned.items() if var.source != "lookup"}
    in_python = python_resources.declared(tree)  # resources the bundle makes in Python
    if in_python is not None:
        tree = python_resources.apply(tree, in_python, folder, config.target, resolved_variables)
        config = replace(config, tree=tree)
        resolver = Resolver(_Lookup(config, assigned, user, presets).find)
    pipelines_section = (tree.get("resources") or {}).get("pipelines") or {}
    sync_root = _sync_root(folder, tree)
    pipelines = {key: build_pipeline(key, raw, resolver, sync_root, presets)
                 for key, raw in pipelines_section.items()}
    return Bundle(root=folder, name=str(resolver.resolve(name, "bundle.name")),
                  target=config.target, mode=config.mode, variables=resolved_variables,
                  pipelines=pipelines,
                  ignored=_ignored(tree, assigned, resolver, in_python and in_python[0]),
                  files=config.files)


def _presets(tree: LMap, mode: str | None, short: str) -> Presets:
    """The name prefix and pipeline settings the target's mode and `presets` give
    (resourcemutator/apply_target_mode.go, apply_presets.go)."""
    presets = tree.get("presets") or {}
    prefix = presets.get("name_prefix")
    development = presets.get("pipelines_development")
    paused = presets.get("trigger_pause_status") == "PAUSED"
    if mode == "development":
        prefix = prefix if prefix else f"[dev {short}] "
        development = True if development is None else development
        paused = paused or presets.get("trigger_pause_status") is None
    return Presets(str(prefix or ""), development if isinstance(development, bool) else None,
                   paused)


def _schema_prefix(prefix: str) -> str:
    """The CLI's normalizePrefix: `[dev alice] ` -> `dev_alice_`."""
    text = prefix.replace("[", "").strip(" ")
    return normalized(text) + ("_" if text.endswith("]") else "")


class _Lookup:
    """What a `${...}` reference names, in this bundle's configuration."""

    def __init__(self, config: Config, variables: Mapping[str, Variable],
                 user: Mapping[str, str], presets: Presets):
        self.config, self.variables, self.user, self.presets = config, variables, user, presets
        self._git: dict[str, str] | None = None

    def find(self, path: tuple[str | int, ...]) -> Found:
        head = path[0]
        if head == "variables":
            return self._variable(path)
        if head == "bundle":
            return self._bundle(path)
        if head == "workspace":
            return self._workspace(path)
        return self._resource(path)

    def _variable(self, path: tuple[str | int, ...]) -> Found:
        if len(path) < 3 or path[1] not in self.variables:
            raise Missing()
        var = self.variables[str(path[1])]
        if path[2] == "value":
            if var.source == "lookup":
                raise NoLocalValue(
                    f"variable `{var.name}` is a `lookup`, which needs a workspace; give it a "
                    f"value with --var {var.name}=... or BUNDLE_VAR_{var.name}")
            return Found(_get(var.value, path[3:]), ".".join(map(str, path)))
        spec = (self.config.tree.get("variables") or {}).get(var.name) or {}
        return Found(_get(spec, path[2:]), ".".join(map(str, path)))

    def _bundle(self, path: tuple[str | int, ...]) -> Found:
        section = self.config.tree.get("bundle") or {}
        key = ".".join(map(str, path))
        if len(path) >= 3 and path[1] == "git" and path[2] in _GIT:
            git = section.get("git") or {}
            if path[2] in git:
                return Found(_get(git, path[2:]), key)
            return Found(self.git().get(str(path[2]), ""), key)
        if len(path) == 2 and path[1] in _BUNDLE_EMPTY and path[1] not in section:
            return Found("", key)
        return Found(_get(section, path[1:]), key)

    def git(self) -> dict[str, str]:
        """The bundle folder's git branch, commit and origin, as the CLI loads them."""
        if self._git is None:
            root = self.config.root

            def run(*args: str) -> str:
                try:
                    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                          text=True, timeout=10, check=False)
                except (OSError, subprocess.SubprocessError):
                    return ""
                return done.stdout.strip() if done.returncode == 0 else ""

            top = run("rev-parse", "--show-toplevel")
            branch = run("rev-parse", "--abbrev-ref", "HEAD")
            self._git = {"branch": branch, "actual_branch": branch,
                         "commit": run("rev-parse", "HEAD"),
                         "origin_url": run("config", "--get", "remote.origin.url"),
                         "bundle_root_path": os.path.relpath(root, top) if top else ""}
        return self._git

    def _workspace(self, path: tuple[str | int, ...]) -> Found:
        section = self.config.tree.get("workspace") or {}
        key = ".".join(map(str, path))
        if len(path) < 2:
            raise Missing()
        field_ = path[1]
        if field_ == "current_user":
            if len(path) == 3 and path[2] in self.user:
                return Found(self.user[str(path[2])], key)
            if len(path) == 2:
                return Found(dict(self.user), key)
            raise NoLocalValue(f"the workspace user's `{path[2]}` is known only on a "
                               f"workspace; locally the user is `{self.user['userName']}`")
        if field_ == "file_path":
            return Found(str(_sync_root(self.config.root, self.config.tree)), key)
        if field_ == "root_path":
            configured = section.get("root_path")
            user_home = f"/Workspace/Users/{self.user['userName']}"
            if configured is None:
                configured = "~/.bundle/${bundle.name}/${bundle.target}"
            return Found(configured, key, then=lambda v: (
                f"{user_home}/{str(v)[2:]}" if str(v).startswith("~/") else v))
        if field_ in ("resource_path", "artifact_path", "state_path") and len(path) == 2:
            if field_ in section:
                return Found(section[field_], key)
            return Found(f"${{workspace.root_path}}/{str(field_).removesuffix('_path')}s"
                         if field_ != "state_path" else "${workspace.root_path}/state", key)
        if len(path) == 2 and field_ in _WORKSPACE_EMPTY and field_ not in section:
            return Found("", key)
        return Found(_get(section, path[1:]), key)

    def _resource(self, path: tuple[str | int, ...]) -> Found:
        if path[0] != "resources" or len(path) < 4:
            raise Missing()
        kind, key = path[1], path[2]
        resources = self.config.tree.get("resources") or {}
        defined = (resources.get(kind) or {}).get(key)
        if defined is None:
            raise Missing()
        joined = ".".join(map(str, path))
        if path[3] not in defined:
            raise Deployed()
        value = _get(defined, path[3:])
        if len(path) == 4 and path[3] == "name" and kind == "pipelines":
            prefix = self.presets.name_prefix
            return Found(value, joined, then=lambda v: prefix + str(v))
        if len(path) == 4 and path[3] == "name" and kind == "schemas" and not (
                (self.config.tree.get("experimental") or {}).get("skip_name_prefix_for_schema")):
            prefix = _schema_prefix(self.presets.name_prefix)
            return Found(value, joined, then=lambda v: prefix + str(v))
        return Found(value, joined)


def _get(node: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise Missing()
    return node


def _sync_root(root: Path, tree: LMap) -> Path:
    """The folder the bundle deploys from: its root, or the folder holding it and every
    `sync.paths` entry (relative to the file that lists it), as the CLI infers it."""
    paths = (tree.get("sync") or {}).get("paths") or []
    folders = [root]
    for entry in paths:
        base = entry.file.parent if isinstance(entry, LStr) else root
        folders.append(Path(os.path.normpath(base / str(entry))))
    return Path(os.path.commonpath(folders))


def _ignored(tree: LMap, variables: Mapping[str, Variable], resolver: Resolver,
             ran_python: str | None) -> dict[str, object]:
    """The bundle's settings with no local meaning, resolved where they can be. `ran_python`:
    the section whose Python functions ran (`python_resources.declared`), if any."""
    out: dict[str, object] = {}
    workspace = tree.get("workspace")
    if workspace:
        out["workspace"] = plain(resolver.resolve(workspace, "workspace", keep_deployed=True))
    for section in _IGNORED_SECTIONS:
        if section == ran_python == "python":
            continue  # its functions ran (python_resources.py)
        if tree.get(section) is not None:
            out[section] = plain(resolver.resolve(tree[section], section, keep_deployed=True))
    for kind, defined in (tree.get("resources") or {}).items():
        if kind != "pipelines" and defined:
            out[f"resources.{kind}"] = sorted(defined)
    lookups = {name: plain(var.lookup) for name, var in variables.items()
               if var.source == "lookup"}
    if lookups:
        out["variables (lookup)"] = lookups
    return out

