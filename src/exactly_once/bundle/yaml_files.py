"""A bundle's YAML files as the Databricks CLI reads them: each value remembers the file and line
it was written on (relative paths are relative to that file; messages name it).

The CLI parses YAML with Go's yaml.v3, which follows YAML 1.2's core schema: only `true` /
`false` are booleans (`yes`, `on` stay strings), `0755` is the integer 755, and a date stays
text. PyYAML's SafeLoader follows YAML 1.1, so its implicit types are replaced here by the core
schema's. A key written twice in one mapping is an error, as it is for yaml.v3.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from exactly_once.errors import BundleError

NOWHERE = Path()  # the file of a value made here, not read from a file


class Located:
    """Where a value was written: `file` (absolute) and `line` (1-based, 0 when unknown)."""

    file: Path
    line: int

    def where(self) -> str:
        """`file:line`, the file relative to the current directory when it is under it."""
        return located_file(self.file, self.line)


class LStr(str, Located):
    """A string value of a bundle file."""

    def __new__(cls, value: str, file: Path, line: int = 0) -> LStr:
        obj = super().__new__(cls, value)
        obj.file, obj.line = file, line
        return obj


class LMap(dict[str, Any], Located):
    """A mapping of a bundle file (keys are plain strings, in file order)."""

    def __init__(self, items: Any = (), *, file: Path, line: int = 0):
        super().__init__(items)
        self.file, self.line = file, line


class LList(list[Any], Located):
    """A sequence of a bundle file."""

    def __init__(self, items: Any = (), *, file: Path, line: int = 0):
        super().__init__(items)
        self.file, self.line = file, line


def located_file(file: Path, line: int = 0) -> str:
    """`file` as messages name it (relative to the current directory when under it), `:line`
    when known."""
    try:
        shown = str(file.relative_to(Path.cwd()))
    except ValueError:
        shown = str(file)
    return f"{shown}:{line}" if line else shown


def location_of(value: object) -> str | None:
    """`file:line` of a value read from a bundle file, None for one made here (a number, a
    boolean)."""
    return value.where() if isinstance(value, Located) else None


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), as yaml.v3 resolves.
_CORE_TYPES = (
    # "" among the first characters: an empty value (`key:` and nothing) is null too.
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$",
     "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
     r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+0123456789."),
)


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2's core types and located values."""

    file: Path


_Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in _CORE_TYPES:
    _Loader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _int(loader: _Loader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith(("0o", "0x")):
        return int(text, 0)
    return int(text, 10)  # `0755` is 755 in YAML 1.2, not octal


def _float(loader: _Loader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    return float(text.replace(".inf", "inf").replace(".nan", "nan"))


def _str(loader: _Loader, node: yaml.ScalarNode) -> LStr:
    return LStr(str(loader.construct_scalar(node)), loader.file, node.start_mark.line + 1)


def _map(loader: _Loader, node: yaml.MappingNode) -> LMap:
    out = LMap(file=loader.file, line=node.start_mark.line + 1)
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            key = str(key).lower() if isinstance(key, bool) else str(key)
        if key in out:
            raise BundleError(f"{located_file(loader.file, key_node.start_mark.line + 1)}: "
                              f"invalid YAML: mapping key `{key}` already defined")
        out[str(key)] = loader.construct_object(value_node, deep=True)
    return out


def _list(loader: _Loader, node: yaml.SequenceNode) -> LList:
    return LList((loader.construct_object(child, deep=True) for child in node.value),
                 file=loader.file, line=node.start_mark.line + 1)


_Loader.add_constructor("tag:yaml.org,2002:int", _int)
_Loader.add_constructor("tag:yaml.org,2002:float", _float)
_Loader.add_constructor("tag:yaml.org,2002:str", _str)
_Loader.add_constructor("tag:yaml.org,2002:map", _map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _list)


def load_yaml(file: Path) -> LMap:
    """The top-level mapping of bundle file `file` (an empty file is an empty mapping)."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise BundleError(f"{located_file(file)}: cannot be read: {err.strerror}") from None
    loader = _Loader(text)
    loader.file = file
    try:
        value = loader.get_single_data()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark else 0
        problem = err.problem or err.context or "cannot be parsed"
        raise BundleError(f"{located_file(file, line)}: invalid YAML: {problem}") from None
    except yaml.YAMLError as err:
        raise BundleError(f"{located_file(file)}: invalid YAML: {err}") from None
    finally:
        loader.dispose()
    if value is None:
        return LMap(file=file, line=1)
    if not isinstance(value, LMap):
        raise BundleError(f"{located_file(file, 1)}: a bundle file holds a mapping "
                          f"(`bundle:`, `resources:` ...), not a {type(value).__name__}")
    return value
