"""The checks of one setting's value, as the flat `exactly_once.*` keys carry it (text): each
returns the value or raises a `SettingsError` naming the key."""

from __future__ import annotations

import json
import re
from typing import NoReturn

from exactly_once.errors import SettingsError

PREFIX = "exactly_once"
_INTERVAL = re.compile(r"^\d+\s+(second|minute|hour|day)s?$")


def interval(key: str, value: str) -> str:
    if not _INTERVAL.match(value):
        raise SettingsError(f"setting {PREFIX}.{key} must look like '10 minutes', got {value!r}")
    return value


def one_of(key: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SettingsError(f"setting {PREFIX}.{key} must be one of {', '.join(allowed)}, "
                            f"got {value!r}")
    return value


def missing(key: str) -> NoReturn:
    raise SettingsError(f"setting {PREFIX}.{key} is missing")


def as_int(key: str, value: str) -> int | None:
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise SettingsError(f"setting {PREFIX}.{key} must be an integer, got {value!r}") from None


def as_bool(key: str, value: str) -> bool:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SettingsError(f"setting {PREFIX}.{key} must be true or false, got {value!r}")


def as_rules(key: str, value: str) -> dict[str, str]:
    try:
        rules = json.loads(value)
    except json.JSONDecodeError:
        raise SettingsError(f"setting {PREFIX}.{key} is not a JSON object") from None
    if not isinstance(rules, dict) or not all(isinstance(v, str) for v in rules.values()):
        raise SettingsError(f"setting {PREFIX}.{key} must map rule names to SQL constraints")
    return rules
