"""SQL text checked by the session's own parser, with no query to analyze it against: what a
declaration's SQL (an expectation's constraint, AUTO CDC's `sequence_by`) can be checked for
while the pipeline files load. Whether the columns it names exist is the query's analysis."""

from __future__ import annotations

from typing import Any

from pyspark.errors import ParseException
from pyspark.sql import SparkSession


def parse_error(sql: str) -> ParseException | None:
    """The parser's error when `sql` is not an expression, else None; parsed in the active
    session. A parse costs no Spark job and logs nothing (no query context)."""
    # The parser behind `F.expr`, which in classic Spark 4 parses only when a query is analyzed.
    session: Any = SparkSession.active()
    try:
        session._jsparkSession.sessionState().sqlParser().parseExpression(sql)
    except ParseException as err:
        return err
    return None
