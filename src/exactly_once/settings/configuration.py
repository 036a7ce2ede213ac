"""The pipeline's configuration: Databricks' pipeline parameters, key/value text that pipeline
code reads with `spark.conf.get("mypipeline.startDate")`
(https://docs.databricks.com/aws/en/ldp/parameters: values are text, keys letters, digits and
`_ - .`).

One place holds it, `configuration:` in conf/ (conf/targets/<target>.yml merged over base.yml):
the bundle's pipeline resource carries it on Databricks (deploy/bundle_resource.py), the local
runtime puts it in the session for each update (local/execution/pipeline.py), and
`run --conf KEY=VALUE` adds to it for one run. The `exactly_once.*` keys are the settings of
conf/'s other sections (pipeline.py), never configured here; which Spark settings the runtime
owns, the runtime checks (local/engine/update_settings.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from exactly_once.errors import SettingsError
from exactly_once.settings.values import PREFIX

SECTION = "configuration"
_KEY = re.compile(r"[A-Za-z0-9_.-]+")


def from_document(doc: Mapping[str, Any]) -> dict[str, str]:
    """The `configuration:` section of a conf/ document as text keys and values (YAML's
    numbers, booleans and dates written as Databricks' configuration writes them)."""
    section = doc.get(SECTION)
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise SettingsError(f"conf: {SECTION} must map keys to values, got {section!r}")
    return {check_key(str(key)): _text(str(key), value) for key, value in section.items()}


def _text(key: str, value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, int, float, date, datetime)):
        return str(value)
    raise SettingsError(f"conf: {SECTION} key {key}: a value is text, a number or true/false, "
                        f"got {value!r}")


def check_key(key: str) -> str:
    """`key`, unless it has a character Databricks does not allow in a parameter's key ("_ - .
    or alphanumeric characters") or is one of conf/'s own settings."""
    if not _KEY.fullmatch(key):
        raise SettingsError(f"{SECTION} key {key!r}: a key has letters, digits and _ - . only")
    if key == PREFIX or key.startswith(f"{PREFIX}."):
        raise SettingsError(f"{SECTION} key {key}: {PREFIX}.* are the settings of conf/'s other "
                            "sections; set them there, or with --set")
    return key


def assignments(pairs: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` pairs (`run --conf`) as configuration, each key checked; the value is
    everything after the first `=`."""
    configuration = {}
    for pair in pairs:
        key, value = split(pair)
        configuration[check_key(key)] = value
    return configuration


def split(pair: str) -> tuple[str, str]:
    """`KEY=VALUE` as (KEY, VALUE), both stripped; ValueError if there is no key or no `=`."""
    key, equals, value = pair.partition("=")
    if not equals or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {pair!r}")
    return key.strip(), value.strip()
