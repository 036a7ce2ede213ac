"""`${...}` references in bundle values, resolved as the Databricks CLI resolves them
(libs/dyn/dynvar, bundle/config/mutator/resolve_variable_references.go):

- a reference is `${a.b.c}`, each part starting with a letter (`${var.list[0]}` indexes);
  `${var.x}` is short for `${variables.x.value}`, and `${var.x.field}` reaches into a complex
  variable;
- only `var`, `variables`, `bundle`, `workspace` and `resources` references are resolved; any
  other `${...}` (a Spark SQL `${param}`, a shell `${HOME}`) is left as written;
- a value that is one reference and nothing else takes the referenced value whole (a number, a
  mapping of a complex variable); a reference inside a longer string is replaced by the value
  as text (`true`/`false` for booleans), and a mapping or list there is an error;
- a referenced value may itself hold references (recursively); a reference back to one on the
  way is a cycle, an error naming the chain;
- a reference to something that does not exist is an error naming the file, line and key
  where it is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exactly_once.bundle.yaml_files import NOWHERE, LList, LMap, LStr
from exactly_once.errors import BundleError

_PART = r"[^\W\d_]+(?:[-_]*[^\W_]+)*"  # dynvar's \p{L}+([-_]*[\p{L}\p{N}]+)*
REFERENCE = re.compile(rf"\$\{{({_PART}(?:\.{_PART}(?:\[[0-9]+\])*)*(?:\[[0-9]+\])*)\}}")
RESOLVED = ("var", "variables", "bundle", "workspace", "resources")


class Missing(Exception):  # noqa: N818 - a lookup's outcome, caught here
    """The reference names nothing."""

    def message(self, reference: str) -> str:
        return f"reference does not exist: ${{{reference}}}"


class NoLocalValue(Missing):
    """The reference names something only a workspace has (a `lookup` variable, the user's
    id); `reason` says what and how to give a value."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

    def message(self, reference: str) -> str:
        return f"${{{reference}}} has no local value: {self.reason}"


class Deployed(Missing):
    """The reference names a field of a resource that exists once deployed (its `id`, `url`)."""

    def message(self, reference: str) -> str:
        return (f"${{{reference}}} is known only once the bundle is deployed; it has no local "
                f"value")


@dataclass(frozen=True)
class Found:
    """What a reference names: its `value` as written (it may hold references), the key path
    `key` it was found at, and `then`, applied to the value once resolved (a name prefix)."""

    value: Any
    key: str
    then: Callable[[Any], Any] | None = None


Lookup = Callable[[tuple[str | int, ...]], Found]


def parts(reference: str) -> tuple[str | int, ...]:
    """`a.b[0].c` as ("a", "b", 0, "c")."""
    out: list[str | int] = []
    for piece in reference.split("."):
        name, *indexes = piece.split("[")
        out.append(name)
        out.extend(int(index.rstrip("]")) for index in indexes)
    return tuple(out)


def as_text(value: Any) -> str:
    """A resolved scalar as the CLI writes it into a string (Go's fmt.Sprint)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    return str(value)


class Resolver:
    """Resolves references against `lookup`, which finds what a reference names; each
    reference is resolved once."""

    def __init__(self, lookup: Lookup):
        self._lookup = lookup
        self._done: dict[str, Any] = {}

    def resolve(self, value: Any, key: str, seen: tuple[str, ...] = (),
                keep_deployed: bool = False) -> Any:
        """`value` (found at key path `key`) with every reference in it resolved; with
        `keep_deployed`, a reference known only once deployed stays as written (a setting with
        no local meaning keeps it for showing)."""
        if isinstance(value, dict):
            out = LMap(file=getattr(value, "file", NOWHERE), line=getattr(value, "line", 0))
            for name, item in value.items():
                out[name] = self.resolve(item, f"{key}.{name}", seen, keep_deployed)
            return out
        if isinstance(value, list):
            return LList((self.resolve(item, f"{key}[{i}]", seen, keep_deployed)
                          for i, item in enumerate(value)),
                         file=getattr(value, "file", NOWHERE), line=getattr(value, "line", 0))
        if isinstance(value, str):
            return self._string(value, key, seen, keep_deployed)
        return value

    def _string(self, text: str, key: str, seen: tuple[str, ...], keep_deployed: bool) -> Any:
        matches = [m for m in REFERENCE.finditer(text) if m.group(1).split(".")[0].split("[")[0]
                   in RESOLVED]
        if not matches:
            return text
        if len(matches) == 1 and matches[0].group(0) == text:
            return self._reference(matches[0].group(1), text, key, seen, keep_deployed)
        pieces, last = [], 0
        for match in matches:
            value = self._reference(match.group(1), text, key, seen, keep_deployed)
            if isinstance(value, (dict, list)):
                raise BundleError(f"{_where(text)}{key}: cannot put the "
                                  f"{'mapping' if isinstance(value, dict) else 'list'} of "
                                  f"${{{match.group(1)}}} into a string")
            pieces += [text[last:match.start()], as_text(value)]
            last = match.end()
        pieces.append(text[last:])
        return _like(text, "".join(pieces))

    def _reference(self, reference: str, text: str, key: str, seen: tuple[str, ...],
                   keep_deployed: bool = False) -> Any:
        if reference in seen:
            chain = " -> ".join(f"${{{r}}}" for r in (*seen, reference))
            raise BundleError(f"{_where(text)}{key}: cycle detected in references: {chain}")
        if reference not in self._done:
            try:
                self._done[reference] = self._value(reference, text, key, seen)
            except _Kept as kept:
                if keep_deployed:
                    return f"${{{reference}}}"
                if seen:  # inside another reference: the outermost one's setting decides
                    raise
                raise kept.error from None
        value = self._done[reference]
        # A path is relative to the file where it is used, not where it is defined (the CLI).
        return _like(text, value) if isinstance(value, str) else value

    def _value(self, reference: str, text: str, key: str, seen: tuple[str, ...]) -> Any:
        path = parts(reference)
        if path[0] == "var":
            path = ("variables", path[1], "value", *path[2:])
        try:
            found = self._lookup(path)
        except Missing as missing:
            error = BundleError(f"{_where(text)}{key}: {missing.message(reference)}")
            raise (_Kept(error) if isinstance(missing, Deployed) else error) from None
        value = self.resolve(found.value, found.key, (*seen, reference))
        return found.then(value) if found.then is not None else value


class _Kept(Exception):  # noqa: N818 - not an error until no setting keeps it
    """A reference known only once deployed: `error`, unless the setting keeps it."""

    def __init__(self, error: BundleError):
        super().__init__(str(error))
        self.error = error


def _where(text: str) -> str:
    return f"{text.where()}: " if isinstance(text, LStr) else ""


def _like(original: str, value: str) -> str:
    """`value` located where `original` was written."""
    return LStr(value, original.file, original.line) if isinstance(original, LStr) else value
