"""The table-level checks of the Great Expectations suites (`quality.tables` in conf/): run by
`exactly-once quality validate` and the Databricks quality job, never by the pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly_once.errors import SettingsError
from exactly_once.paths import CONF_DIR
from exactly_once.settings.conf_files import target_document


@dataclass(frozen=True)
class TableQuality:
    """The table-level checks of one table (`quality.tables.<table>`), for its GX suite."""

    table: str
    topic: str | None = None  # the topic whose rules also apply, where the table has their columns
    not_null: tuple[str, ...] = ()
    unique: tuple[str, ...] = ()
    allowed_values: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    ranges: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # {table, key}: this table has at most as many rows as that table has distinct keys.
    keys_at_most_in: Mapping[str, str] | None = None

    @property
    def parameter(self) -> str | None:
        """The suite parameter holding the other table's distinct key count."""
        if not self.keys_at_most_in:
            return None
        return f"{self.keys_at_most_in['table']}_distinct_{self.keys_at_most_in['key']}"


_TABLE_QUALITY_KEYS = {"topic", "not_null", "unique", "allowed_values", "ranges", "keys_at_most_in"}


def load_quality(target: str = "local", conf_dir: Path = CONF_DIR) -> dict[str, TableQuality]:
    """`quality.tables` for a target, from conf/base.yml + conf/targets/<target>.yml."""
    doc = target_document(target, conf_dir)
    tables = (doc.get("quality") or {}).get("tables") or {}
    if not tables:
        raise SettingsError("conf has no quality.tables")
    result = {}
    for name, spec in tables.items():
        spec = dict(spec or {})
        unknown = set(spec) - _TABLE_QUALITY_KEYS
        if unknown:
            raise SettingsError(f"quality.tables.{name} has unknown keys {sorted(unknown)}")
        link = spec.get("keys_at_most_in")
        if link is not None and not {"table", "key"} <= set(link):
            raise SettingsError(f"quality.tables.{name}.keys_at_most_in needs `table` and `key`")
        result[name] = TableQuality(
            table=name, topic=spec.get("topic"),
            not_null=tuple(spec.get("not_null") or ()), unique=tuple(spec.get("unique") or ()),
            allowed_values={c: tuple(v) for c, v in (spec.get("allowed_values") or {}).items()},
            ranges=dict(spec.get("ranges") or {}), keys_at_most_in=link)
    return result
