"""Great Expectations 1.x suites for the silver and gold tables, built from `conf/`.

`quality.tables.<table>` in conf/base.yml (overridable per target) lists the table-level checks:
`not_null`, `unique`, `allowed_values`, `ranges` and `keys_at_most_in` (the table has no more rows
than the other table has distinct keys: gold keys <= silver keys). A table with a `topic` also gets
that topic's `rules` (the ones that drive the pipeline expectations and the quarantine) wherever
the table has the columns a rule reads; each becomes an `UnexpectedRowsExpectation` selecting the
rows where the rule is false or NULL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exactly_once.config import Settings, SettingsError, _deep_merge, _read_yaml
from exactly_once.paths import CONF_DIR


@dataclass(frozen=True)
class TableQuality:
    table: str
    topic: str | None = None
    not_null: tuple[str, ...] = ()
    unique: tuple[str, ...] = ()
    allowed_values: Mapping[str, tuple] = field(default_factory=dict)
    ranges: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    keys_at_most_in: Mapping[str, str] | None = None  # {table, key}

    @property
    def parameter(self) -> str | None:
        """The suite parameter holding the other table's distinct key count."""
        if not self.keys_at_most_in:
            return None
        return f"{self.keys_at_most_in['table']}_distinct_{self.keys_at_most_in['key']}"


def load_quality(target: str = "local", conf_dir: Path = CONF_DIR) -> dict[str, TableQuality]:
    """`quality.tables` of conf/base.yml merged with conf/targets/<target>.yml."""
    target_file = conf_dir / "targets" / f"{target}.yml"
    if not target_file.exists():
        raise SettingsError(f"unknown target {target!r}")
    doc = _deep_merge(_read_yaml(conf_dir / "base.yml"), _read_yaml(target_file))
    tables = ((doc.get("quality") or {}).get("tables")) or {}
    if not tables:
        raise SettingsError("conf has no quality.tables")
    result = {}
    for name, spec in tables.items():
        spec = dict(spec or {})
        unknown = set(spec) - {"topic", "not_null", "unique", "allowed_values", "ranges",
                               "keys_at_most_in"}
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


def applicable_rules(rules: Mapping[str, str], df) -> dict[str, str]:
    """The rules Spark can evaluate on `df` (every column they read is there)."""
    import logging

    from pyspark.sql import functions as F

    usable = {}
    # pyspark logs every analysis error it raises; here they are expected answers.
    quiet = logging.getLogger("SQLQueryContextLogger")
    level, quiet.disabled = quiet.disabled, True
    try:
        for name, sql in rules.items():
            try:
                _ = df.select(F.expr(sql)).schema  # analysis only; no job runs
            except Exception:
                continue
            usable[name] = sql
    finally:
        quiet.disabled = level
    return usable


def build_suite(tq: TableQuality, settings: Settings | None = None, df=None):
    """The table's ExpectationSuite (`df` decides which topic rules apply)."""
    import great_expectations as gx
    import great_expectations.expectations as gxe

    suite = gx.ExpectationSuite(name=tq.table, meta={"source": "conf/base.yml quality.tables"})
    for column in tq.not_null:
        suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=column))
    for column in tq.unique:
        suite.add_expectation(gxe.ExpectColumnValuesToBeUnique(column=column))
    for column, values in tq.allowed_values.items():
        suite.add_expectation(gxe.ExpectColumnValuesToBeInSet(column=column,
                                                              value_set=list(values)))
    for column, bounds in tq.ranges.items():
        suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(
            column=column, min_value=bounds.get("min"), max_value=bounds.get("max")))
    if tq.parameter:
        suite.add_expectation(gxe.ExpectTableRowCountToBeBetween(
            min_value=0, max_value={"$PARAMETER": tq.parameter},
            description=f"rows <= distinct `{tq.keys_at_most_in['key']}` in "
                        f"`{tq.keys_at_most_in['table']}`"))
    if tq.topic and settings is not None and df is not None:
        rules = applicable_rules(settings.topic(tq.topic).rules, df)
        for name, sql in rules.items():
            suite.add_expectation(gxe.UnexpectedRowsExpectation(
                unexpected_rows_query=f"SELECT * FROM {{batch}} WHERE NOT coalesce(({sql}), false)",
                description=f"rule `{name}` (topics.{tq.topic}.rules): {sql}",
                meta={"rule": name}))
    return suite
