"""Great Expectations 1.x suites for the silver and gold tables, built from `conf/`.

`quality.tables.<table>` in conf/base.yml (overridable per target, read by
`settings.quality.load_quality`) lists the table-level checks: `not_null`, `unique`,
`allowed_values`, `ranges` and `keys_at_most_in` (the table has no more rows than the other
table has distinct keys: gold keys <= silver keys). A table with a `topic` also gets that
topic's `rules` (the ones that drive the pipeline expectations and the quarantine) wherever the
table has the columns a rule reads; each becomes an `UnexpectedRowsExpectation` selecting the
rows where the rule is false or NULL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from exactly_once.settings.pipeline import Settings
from exactly_once.settings.quality import TableQuality

if TYPE_CHECKING:  # annotations only: GX and Spark are imported where they are used
    from great_expectations import ExpectationSuite
    from pyspark.sql import DataFrame


def applicable_rules(rules: Mapping[str, str], df: DataFrame) -> dict[str, str]:
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


def build_suite(tq: TableQuality, settings: Settings | None = None,
                df: DataFrame | None = None) -> ExpectationSuite:
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
    link = tq.keys_at_most_in
    if link:
        suite.add_expectation(gxe.ExpectTableRowCountToBeBetween(
            min_value=0, max_value={"$PARAMETER": tq.parameter},
            description=f"rows <= distinct `{link['key']}` in `{link['table']}`"))
    if tq.topic and settings is not None and df is not None:
        rules = applicable_rules(settings.topic(tq.topic).rules, df)
        for name, sql in rules.items():
            suite.add_expectation(gxe.UnexpectedRowsExpectation(
                unexpected_rows_query=f"SELECT * FROM {{batch}} WHERE NOT coalesce(({sql}), false)",
                description=f"rule `{name}` (topics.{tq.topic}.rules): {sql}",
                meta={"rule": name}))
    return suite
