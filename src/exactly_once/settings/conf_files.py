"""The one reader of `conf/`: conf/base.yml with conf/targets/<target>.yml merged over it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from exactly_once.errors import SettingsError

# libyaml's parser where PyYAML was built with it (its wheels are), else PyYAML's own.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def target_document(target: str, conf_dir: Path) -> dict[str, Any]:
    """conf/base.yml with conf/targets/<target>.yml merged over it."""
    target_file = conf_dir / "targets" / f"{target}.yml"
    if not target_file.exists():
        known = sorted(p.stem for p in (conf_dir / "targets").glob("*.yml"))
        raise SettingsError(f"unknown target {target!r}; conf/targets has {known}")
    return _deep_merge(_read_yaml(conf_dir / "base.yml"), _read_yaml(target_file))


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    """The file as `yaml.safe_load` reads it, parsed by libyaml (PyYAML's C parser, the same
    safe types): about a tenth of the pure-Python parser's time, which every update paid about
    six times over (BENCHMARKS.md). A file libyaml refuses is read by PyYAML's own parser,
    which decides, and whose message shows the offending line."""
    text = path.read_text()
    try:
        return yaml.load(text, Loader=_SAFE_LOADER) or {}
    except yaml.YAMLError:
        pass
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise SettingsError(f"{path} is not valid YAML: {err}") from None
