"""SQL text checked by the session's own parser, with no query to analyze it against: what a
declaration's SQL (an expectation's constraint, AUTO CDC's `sequence_by`, a table's schema) can
be checked for while the pipeline files load. Whether the columns it names exist is the query's
analysis."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.errors import ParseException
from pyspark.logger import PySparkLogger
from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, _parse_datatype_json_string

# pyspark logs each parse or analysis error with its query context before raising it: the
# one-line problem the runtime makes of it says it already.
_QUERY_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


@contextmanager
def quiet_query_context() -> Iterator[None]:
    """While inside, pyspark does not log the query context of the errors it raises. The
    loggers are the process's: blocks in several threads at once (an update's tables, each
    building its query) turn them back on when the last one ends."""
    global _quiet_blocks
    # pyspark's own logger class: a plain logger made here first under the same name would be
    # the one pyspark gets, and fail on the error class pyspark logs with (TypeError).
    loggers = [PySparkLogger.getLogger(name) for name in _QUERY_CONTEXT_LOGGERS]
    with _quiet_lock:
        if _quiet_blocks == 0:
            _saved_states[:] = [logger.disabled for logger in loggers]
            for logger in loggers:
                logger.disabled = True
        _quiet_blocks += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_blocks -= 1
            if _quiet_blocks == 0:
                for logger, was in zip(loggers, _saved_states, strict=True):
                    logger.disabled = was


_quiet_lock = threading.Lock()
_quiet_blocks = 0  # blocks of quiet_query_context running
_saved_states: list[bool] = []  # the loggers' `disabled` before the first of them


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


@dataclass(frozen=True)
class Identity:
    """GENERATED ALWAYS | BY DEFAULT AS IDENTITY (START WITH start INCREMENT BY step)."""

    start: int
    step: int
    always: bool  # ALWAYS: the query may not give a value; BY DEFAULT: it may


@dataclass(frozen=True)
class ColumnDefinition:
    """A column as a CREATE TABLE statement defines it."""

    name: str
    data_type: DataType
    nullable: bool
    comment: str | None
    generated: str | None  # GENERATED ALWAYS AS (<expression>)
    identity: Identity | None  # GENERATED ... AS IDENTITY
    default: bool  # DEFAULT <expression>


@dataclass(frozen=True)
class TableSchema:
    """A table schema in DDL (`a INT NOT NULL COMMENT '...', b INT GENERATED ALWAYS AS (a + 1),
    CONSTRAINT ...`): its columns, and the kind of each table constraint (`PrimaryKey`,
    `ForeignKey`, `Check`, `Unique`)."""

    columns: tuple[ColumnDefinition, ...]
    constraints: tuple[str, ...]


def parse_table_schema(ddl: str) -> TableSchema:
    """`ddl` parsed as the column list of a CREATE TABLE statement, which (unlike a plain
    schema string) takes generated columns, defaults and constraints; a ParseException when it
    is not one. Parsed only: nothing is created or analyzed."""
    session: Any = SparkSession.active()
    with quiet_query_context():  # its error is the declaration's one line
        plan = session._jsparkSession.sessionState().sqlParser().parsePlan(
            f"CREATE TABLE t ({ddl}) USING delta")
    jcolumns, jconstraints = plan.columns(), plan.tableSpec().constraints()

    def option(value: Any) -> Any:
        return value.get() if value.isDefined() else None

    columns = []
    for i in range(jcolumns.length()):
        column = jcolumns.apply(i)
        columns.append(ColumnDefinition(
            name=str(column.name()),
            data_type=_parse_datatype_json_string(column.dataType().json()),
            nullable=bool(column.nullable()), comment=option(column.comment()),
            generated=option(column.generationExpression()),
            identity=_identity(option(column.identityColumnSpec())),
            default=bool(column.defaultValue().isDefined())))
    kinds = tuple(str(jconstraints.apply(i).getClass().getSimpleName()).removesuffix("Constraint")
                  for i in range(jconstraints.length()))
    return TableSchema(tuple(columns), kinds)


def _identity(spec: Any) -> Identity | None:
    if spec is None:
        return None
    return Identity(int(spec.getStart()), int(spec.getStep()), not spec.isAllowExplicitInsert())
