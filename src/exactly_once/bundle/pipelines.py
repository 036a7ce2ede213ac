"""A bundle's `resources.pipelines.<key>` as the local runtime runs it.

What has a local meaning (the Databricks CLI's path rules: bundle/config/mutator/
translate_paths.go, normalize_paths.go, resourcemutator/expand_pipeline_glob_paths.go):

- `name`, shown as Databricks shows it: with the target's name prefix (`[dev <short_name>] ` in
  development mode, or `presets.name_prefix`). It names the pipeline in messages only; the
  datasets' names are the code's, unaffected, as on Databricks;
- `catalog`, and `schema` or the older `target` (one of the two: the pipeline's default schema);
- `root_path`: a folder, relative to the file that sets it; the runtime puts it on `sys.path`
  as Databricks does, so the pipeline's code imports modules beside it;
- `libraries`, every source file in order, each once: `file.path` (a Python or SQL file, not a
  notebook), `notebook.path` (a notebook: a `.py` / `.sql` starting with `# Databricks
  notebook source` / `-- Databricks notebook source`, or an `.ipynb`; written with its
  extension, as the CLI requires of local notebooks), `glob.include` (`*`, `?`, `[...]`, and
  `**` for any depth; its `.py`, `.sql` and `.ipynb` files, hidden files and `__pycache__`
  left out). Paths are relative to the file that writes them, and must stay inside the bundle's
  folder (or `sync.paths`): what is outside is not deployed. A path or glob matching nothing is
  an error (Databricks would find no code there); so is a workspace path (`/Workspace/...`),
  which has no local copy, and `glob.exclude`, which pipelines do not have;
- `configuration`: the pipeline's Spark settings, values as strings (`true`, `20000`) as
  Databricks passes them to `spark.conf`;
- `event_log`: `name`, and `catalog` and `schema` (the pipeline's by default), where the
  pipeline publishes its event log as a table
  (https://docs.databricks.com/aws/en/ldp/monitor-event-logs).

Everything else (clusters, photon, serverless, channel, edition, continuous, development,
notifications, permissions, environment, `jar` / `maven` / `whl` libraries, ...) is kept in
`no_local_meaning`, resolved, for `dry-run` to show; `development` and `continuous` as the
target's mode sets them (development mode: `development: true`, `continuous: false`).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly_once.bundle.references import Resolver, as_text
from exactly_once.bundle.yaml_files import LMap, located_file, location_of
from exactly_once.errors import BundleError

SOURCE_SUFFIXES = (".py", ".sql", ".ipynb")
LOCAL_KEYS = ("name", "catalog", "schema", "target", "configuration", "libraries", "root_path",
              "event_log")
NOTEBOOK_HEADERS = {".py": "# Databricks notebook source", ".sql": "-- Databricks notebook source"}
NO_LOCAL_LIBRARIES = ("jar", "maven", "whl")


@dataclass(frozen=True)
class PipelineResource:
    """One pipeline of a bundle, its target's overrides merged and references resolved."""

    key: str
    name: str
    catalog: str | None
    schema: str | None
    root_path: Path | None
    libraries: tuple[Path, ...]
    configuration: Mapping[str, str]
    declared_in: Path
    no_local_meaning: Mapping[str, object] = field(default_factory=dict)
    event_log: EventLogName | None = None


@dataclass(frozen=True)
class EventLogName:
    """`event_log`: the name the pipeline publishes its event log under; a part not given is
    the pipeline's own catalog or schema."""

    name: str
    catalog: str | None = None
    schema: str | None = None


@dataclass(frozen=True)
class Presets:
    """What the target's mode and `presets` do to a pipeline: its name prefix, and
    `development` / `continuous` when they set them."""

    name_prefix: str = ""
    development: bool | None = None
    paused: bool = False


def build_pipeline(key: str, raw: LMap, resolver: Resolver, sync_root: Path,
                   presets: Presets) -> PipelineResource:
    """Pipeline `key` from its merged definition `raw`."""
    at = f"resources.pipelines.{key}"
    if not isinstance(raw, dict):
        raise BundleError(f"{location_of(raw) or '?'}: {at}: a mapping of pipeline settings")
    local = {k: resolver.resolve(raw[k], f"{at}.{k}") for k in LOCAL_KEYS if k in raw}
    if local.get("schema") is not None and local.get("target") is not None:
        raise BundleError(f"{location_of(raw['target'])}: {at}: set `schema` or the older "
                          f"`target`, not both")
    schema_key = "schema" if local.get("schema") is not None else "target"
    others: dict[str, object] = {}
    for name, value in raw.items():
        if name not in LOCAL_KEYS:
            others[name] = plain(resolver.resolve(value, f"{at}.{name}", keep_deployed=True))
    if presets.development is not None:
        others["development"] = presets.development
    if presets.paused and "continuous" in others:
        others["continuous"] = False
    libraries, no_local_libraries = _libraries(key, local.get("libraries"), sync_root)
    if no_local_libraries:
        others["libraries"] = no_local_libraries
    name = _text(local.get("name", key), f"{at}.name")
    return PipelineResource(
        key=key,
        name=presets.name_prefix + name,
        catalog=_optional_text(local.get("catalog"), f"{at}.catalog"),
        schema=_optional_text(local.get(schema_key), f"{at}.{schema_key}"),
        root_path=_root_path(local.get("root_path"), f"{at}.root_path", sync_root),
        libraries=libraries,
        configuration=_configuration(local.get("configuration"), f"{at}.configuration"),
        declared_in=raw.file,
        no_local_meaning=others,
        event_log=_event_log(local.get("event_log"), f"{at}.event_log"))


def plain(value: Any) -> Any:
    """`value` as plain Python (dicts, lists, str) for showing."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def _text(value: Any, key: str) -> str:
    if isinstance(value, (dict, list)) or value is None:
        shape = "a mapping" if isinstance(value, dict) else "a list" if value is not None \
            else "null"
        raise BundleError(f"{location_of(value) or '?'}: {key}: a string, not {shape}")
    return as_text(value)


def _optional_text(value: Any, key: str) -> str | None:
    return None if value is None or value == "" else _text(value, key)


def _event_log(value: Any, key: str) -> EventLogName | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BundleError(f"{location_of(value) or '?'}: {key}: a mapping of `name`, `catalog` "
                          f"and `schema`")
    unknown = sorted(str(k) for k in value if k not in ("name", "catalog", "schema"))
    if unknown:
        raise BundleError(f"{location_of(value) or '?'}: {key}: no setting `{unknown[0]}` (an "
                          f"event log has `name`, `catalog` and `schema`)")
    if value.get("name") in (None, ""):
        raise BundleError(f"{location_of(value) or '?'}: {key}: the event log's `name` is "
                          f"missing")
    return EventLogName(_text(value["name"], f"{key}.name"),
                        _optional_text(value.get("catalog"), f"{key}.catalog"),
                        _optional_text(value.get("schema"), f"{key}.schema"))


def _configuration(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BundleError(f"{location_of(value) or '?'}: {key}: a mapping of Spark settings")
    out = {}
    for name, item in value.items():
        if item is None:
            raise BundleError(f"{location_of(value) or '?'}: {key}.{name}: no value (write "
                              f"'' for an empty string)")
        out[str(name)] = _text(item, f"{key}.{name}")
    return out


def _local_path(value: Any, key: str, sync_root: Path) -> Path:
    """A path written in a bundle file, relative to that file, checked to be in the bundle."""
    text = _text(value, key)
    where = location_of(value) or "?"
    # An absolute path in the synced folder is one built on `${workspace.file_path}`: the
    # synced copy of a bundle file, that is, locally, the file itself.
    if "://" in text or (text.startswith("/")
                         and not Path(os.path.normpath(text)).is_relative_to(sync_root)):
        raise BundleError(f"{where}: {key}: `{text}` is a workspace path, which has no local "
                          f"copy; write the path of the file in the bundle, relative to this "
                          f"file")
    base = Path(value.file).parent if location_of(value) else sync_root
    path = Path(os.path.normpath(base / text))
    if not path.is_relative_to(sync_root):
        raise BundleError(f"{where}: {key}: `{text}` is outside the bundle's folder "
                          f"{located_file(sync_root)} (and `sync.paths`), so it is not deployed")
    return path


def _root_path(value: Any, key: str, sync_root: Path) -> Path | None:
    if value is None:
        return None
    path = _local_path(value, key, sync_root)
    if not path.is_dir():
        raise BundleError(f"{location_of(value) or '?'}: {key}: `{value}` is not a folder")
    return path


def _libraries(key: str, value: Any, sync_root: Path) -> tuple[tuple[Path, ...], list[Any]]:
    at = f"resources.pipelines.{key}.libraries"
    if value is None:
        return (), []
    if not isinstance(value, list):
        raise BundleError(f"{location_of(value) or '?'}: {at}: a list of libraries")
    found: list[Path] = []
    no_local: list[Any] = []
    for i, library in enumerate(value):
        here = f"{at}[{i}]"
        if not isinstance(library, dict) or len(library) != 1:
            raise BundleError(f"{location_of(library) or location_of(value)}: {here}: one of "
                              f"`file`, `notebook`, `glob` (or jar, maven, whl)")
        (kind, body), = library.items()
        if kind in NO_LOCAL_LIBRARIES:
            no_local.append(plain(library))
            continue
        if kind not in ("file", "notebook", "glob") or not isinstance(body, dict):
            raise BundleError(f"{location_of(library)}: {here}: `{kind}` is not a pipeline "
                              f"library (file, notebook, glob, jar, maven, whl)")
        field_name = "include" if kind == "glob" else "path"
        extra = sorted(set(body) - {field_name})
        if extra:
            raise BundleError(f"{location_of(body)}: {here}.{kind}: `{extra[0]}` is not a "
                              f"setting of a `{kind}` library (it has `{field_name}` only)")
        if body.get(field_name) is None:
            raise BundleError(f"{location_of(body)}: {here}.{kind}.{field_name}: not set")
        raw = body[field_name]
        where = f"{here}.{kind}.{field_name}"
        if kind == "glob":
            matches = _glob(raw, where, sync_root)
        else:
            matches = [_source_file(kind, match, raw, where)
                       for match in _expanded(raw, where, sync_root)]
        found.extend(m for m in matches if m not in found)
    return tuple(found), no_local


def _expanded(value: Any, key: str, sync_root: Path) -> list[Path]:
    """A `file` / `notebook` path, which may be a glob (`*`, `?`, `[...]`: the CLI expands it);
    a glob matching nothing is kept, to be reported as missing."""
    path = _local_path(value, key, sync_root)
    if not glob.has_magic(str(path)):
        return [path]
    return [Path(p) for p in sorted(glob.glob(str(path)))] or [path]


def _source_file(kind: str, path: Path, value: Any, key: str) -> Path:
    where = location_of(value) or "?"
    if not path.is_file():
        if kind == "notebook" and not path.suffix:
            tried = [path.with_name(path.name + s) for s in (".py", ".sql", ".ipynb")]
            existing = [p for p in tried if p.is_file()]
            if existing:
                raise BundleError(f"{where}: {key}: notebook `{value}` not found; did you mean "
                                  f"`{value}{existing[0].suffix}`? (the Databricks CLI wants a "
                                  f"local notebook's extension)")
        raise BundleError(f"{where}: {key}: {kind} `{value}` not found "
                          f"({located_file(path)})")
    if path.suffix not in SOURCE_SUFFIXES:
        raise BundleError(f"{where}: {key}: `{value}` is not a Python or SQL source file "
                          f"(.py, .sql, .ipynb)")
    notebook = is_notebook(path)
    if kind == "file" and notebook:
        raise BundleError(f"{where}: {key}: `{value}` is a notebook; list it as "
                          f"`notebook: path:` (the Databricks CLI refuses a notebook as a file)")
    if kind == "notebook" and not notebook:
        raise BundleError(f"{where}: {key}: `{value}` is not a notebook (no `Databricks "
                          f"notebook source` first line); list it as `file: path:`")
    return path


def is_notebook(path: Path) -> bool:
    """Whether `path` is a Databricks notebook, as the CLI decides (libs/notebook/detect.go):
    an `.ipynb`, or a `.py` / `.sql` whose first line (of its first 32 bytes) is the source
    format's header."""
    if path.suffix == ".ipynb":
        return True
    header = NOTEBOOK_HEADERS.get(path.suffix)
    if header is None:
        return False
    with path.open("rb") as f:
        first = f.read(32).decode("utf-8", "replace").splitlines()
    return bool(first) and first[0] == header


def _glob(value: Any, key: str, sync_root: Path) -> list[Path]:
    pattern = _local_path(value, key, sync_root)
    where = location_of(value) or "?"
    if not glob.has_magic(str(pattern)):
        if pattern.is_dir():
            raise BundleError(f"{where}: {key}: `{value}` is a folder; write `{value}/**` to "
                              f"include its files")
        candidates = [pattern] if pattern.is_file() else []
    else:
        candidates = sorted(Path(p) for p in glob.glob(str(pattern), recursive=True))
    matches = [p for p in candidates if p.is_file() and p.suffix in SOURCE_SUFFIXES
               and "__pycache__" not in p.parts]
    if not matches:
        raise BundleError(f"{where}: {key}: `{value}` matches no Python or SQL source file "
                          f"({located_file(pattern)})")
    return matches
