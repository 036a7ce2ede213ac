"""A pipeline SQL statement as what it declares: a dataset, a flow, an AUTO CDC flow or a
setting for the flows after it.

Spark's parser (SparkSqlParser, Spark 4.1+'s pipeline grammar) parses what it knows: `CREATE
STREAMING TABLE` / `CREATE MATERIALIZED VIEW` with their table clauses (COMMENT, TBLPROPERTIES,
PARTITIONED BY, CLUSTER BY, USING), `CREATE TEMPORARY VIEW`, `CREATE FLOW ... AS INSERT INTO
... BY NAME`, `SET`, and every query. What Databricks adds on top is read here and blanked out
of the text Spark is given (the same length, so Spark's positions stay the file's): `OR
REFRESH` and `PRIVATE`, `LOCATION` (which Spark's pipeline grammar refuses), `CONSTRAINT name
EXPECT (cond) [ON VIOLATION DROP ROW | FAIL UPDATE]` in the column list, `INSERT INTO ONCE`
(the create-flow page now writes `INSERT ONCE INTO`: both are read), a flow's `COMMENT`; AUTO
CDC and APPLY CHANGES INTO are sql_auto_cdc.py's. The references:

  https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-streaming-table
  https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-materialized-view
  https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-temporary-view
  https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-view (refused: Unity Catalog)
  https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-flow
  https://docs.databricks.com/aws/en/ldp/expectations (CONSTRAINT ... EXPECT)

What the runtime does not run is the statement's error, one line (sql_files.Statement.error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.errors import ParseException
from pyspark.sql import SparkSession

from exactly_once.errors import first_line
from exactly_once.local.catalog.names import quoted
from exactly_once.local.engine.sql_parser import quiet_query_context
from exactly_once.local.graph import sql_auto_cdc, sql_use
from exactly_once.local.graph.expectations import DROP, FAIL, WARN, Expectation
from exactly_once.local.graph.sql_auto_cdc import AutoCdc
from exactly_once.local.graph.sql_files import Statement, closing, masked
from exactly_once.local.graph.sql_queries import Query, query_of, query_start
from exactly_once.local.graph.sql_use import Use

STREAMING_TABLE, MATERIALIZED_VIEW, TEMPORARY_VIEW = ("streaming table", "materialized view",
                                                      "temporary view")
VIEW = "view"  # CREATE VIEW: published, https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-view
_NAME = r"(?:`[^`]*`|[\w.]+)"
_DATASET = re.compile(r"CREATE\s+(?P<or_refresh>OR\s+REFRESH\s+)?(?P<private>PRIVATE\s+)?"
                      r"(?:STREAMING\s+TABLE|MATERIALIZED\s+VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                      rf"{_NAME}\s*(?P<columns>\()?", re.I)
_CONSTRAINT = re.compile(r"CONSTRAINT\s+(?P<name>`[^`]*`|\w+)\s+EXPECT\s*\(", re.I)
_LOCATION = re.compile(r"\bLOCATION\s+(?P<path>'(?:[^'\\]|\\.)*')", re.I)
_VIOLATION = re.compile(r"\s*ON\s+VIOLATION\s+(?P<action>DROP\s+ROW|FAIL\s+UPDATE)", re.I)
_FLOW = re.compile(rf"CREATE\s+FLOW\s+(?P<name>{_NAME})\s+"
                   r"(?P<comment>COMMENT\s+'(?:[^'\\]|\\.)*'\s+)?AS\s+"
                   # INSERT INTO ONCE, and the create-flow page's newer INSERT ONCE INTO
                   r"(?P<verb>INSERT\s+(?:INTO\s+(?P<once>ONCE\s+)?|(?P<once_first>ONCE\s+)"
                   r"INTO\s+)|AUTO\s+CDC\s+(?:ONCE\s+)?INTO\b|APPLY\s+CHANGES\s+INTO\b)?",
                   re.I)
_REFUSED = (
    (re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?SINK\b", re.I),
     "CREATE SINK is not pipeline SQL Databricks documents; declare a sink with "
     "dp.create_sink in Python"),
    (re.compile(r"CREATE\s+(?:OR\s+REFRESH\s+)?(?:TEMPORARY\s+)?(?:STREAMING\s+)?LIVE\s+"
                r"(?:TABLE|VIEW)\b", re.I),
     "the older LIVE syntax is not supported by the local runtime; write CREATE OR REFRESH "
     "STREAMING TABLE, MATERIALIZED VIEW or CREATE TEMPORARY VIEW"),
    (re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\b[^;]*?\bCONSTRAINT\s+\S+\s+EXPECT\b",
                re.I | re.S),
     "a CREATE VIEW has no CONSTRAINT ... EXPECT (Databricks: expectations are not supported "
     "on views)"),
    (re.compile(r"(?:USE|SET\s+CATALOG)\b", re.I),
     "the local runtime reads USE CATALOG name and USE [SCHEMA] [catalog.]schema, each name "
     "as written (not IDENTIFIER(...) or a string)"),
    (re.compile(r"CREATE\s+(?:OR\s+REFRESH\s+)?(?:PRIVATE\s+)?(?:STREAMING\s+TABLE|"
                r"MATERIALIZED\s+VIEW)\b[^;]*?\bWITH\s+ROW\s+FILTER\b", re.I | re.S),
     "WITH ROW FILTER needs a Unity Catalog function, which the local runtime does not have"),
)

# Clauses Databricks documents that Spark's parser refuses, named as the Python API refuses
# them (dataset_declarations.py) when a dataset's statement does not parse: looked for before
# its query, in its clauses and column list.
_UNSUPPORTED = (
    (re.compile(r"\bCLUSTER\s+BY\s+AUTO\b", re.I),
     "CLUSTER BY AUTO: automatic key selection is Databricks' predictive optimization, which "
     "the local runtime does not have; give the keys with CLUSTER BY (columns)"),
    (re.compile(r"\bMASK\b", re.I),
     "column masks (MASK) need Unity Catalog functions, which the local runtime does not have"),
    (re.compile(r"\bFLOW\s+(?:INSERT|AUTO\s+CDC|REPLACE\s+WHERE)\b", re.I),
     "a streaming table's FLOW clause (Beta) is not supported by the local runtime; declare "
     "the table, then its flow: CREATE FLOW t AS INSERT INTO t BY NAME ... or AUTO CDC INTO "
     "t ..."),
    (re.compile(r"\b(?:PRIMARY|FOREIGN)\s+KEY\b", re.I),
     "PRIMARY KEY and FOREIGN KEY constraints are Unity Catalog's, which the local runtime does "
     "not have"),
)


@dataclass(frozen=True)
class Dataset:
    """CREATE STREAMING TABLE / MATERIALIZED VIEW / TEMPORARY VIEW."""

    kind: str
    name: str
    query: Query | None
    private: bool = False
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    partition_cols: list[str] | None = None
    cluster_by: list[str] | None = None
    schema: str | None = None  # the column list, as DDL
    path: str | None = None  # LOCATION
    expectations: tuple[Expectation, ...] = ()


@dataclass(frozen=True)
class InsertFlow:
    """CREATE FLOW name AS INSERT INTO [ONCE] target BY NAME query."""

    name: str
    target: str
    query: Query
    once: bool = False
    comment: str | None = None


@dataclass(frozen=True)
class SetConf:
    """SET key = value: a Spark setting of every flow the file declares after it."""

    key: str
    value: str


Declared = Dataset | InsertFlow | AutoCdc | SetConf
Parsed = Declared | Use



def parse(spark: SparkSession, statement: Statement) -> Parsed:
    """What `statement` declares; its one-line error when the runtime does not run it."""
    blanked = masked(statement.text)
    use = sql_use.parse(statement.text, blanked.rstrip().rstrip(";"))
    if use is not None:
        return use
    for pattern, message in _REFUSED:
        if pattern.match(blanked):
            raise statement.error(message)
    flow = _FLOW.match(blanked)
    if flow and flow.group("verb") and not flow.group("verb").upper().startswith("INSERT"):
        auto_cdc = sql_auto_cdc.parse(statement, blanked, flow.start("verb"),
                                      statement.text[flow.start("name"):flow.end("name")]
                                      .strip("`"))
        return replace(auto_cdc, comment=_flow_comment(spark, statement, flow))
    if re.match(r"(?:AUTO\s+CDC|APPLY\s+CHANGES)\s+INTO\b", blanked, re.I):
        return sql_auto_cdc.parse(statement, blanked, 0, None)
    text, extras = _databricks_clauses(spark, statement, blanked, flow)
    try:
        with quiet_query_context():
            plan = _parser(spark).parsePlan(text)
    except ParseException as err:
        dataset, clauses = _DATASET.match(blanked), ""
        if dataset:
            after_name = dataset.start("columns") if dataset.group("columns") else dataset.end()
            clauses = blanked[:_query_as(blanked, after_name)]
        for pattern, message in _UNSUPPORTED:
            if pattern.search(clauses):
                raise statement.error(message) from None
        raise statement.error(f"does not parse: {_located(first_line(err), statement)}") \
            from None
    return _declared(statement, text, plan, extras)


@dataclass
class _Extras:
    """What was read from the statement's text before Spark parsed the rest."""

    private: bool = False
    schema: str | None = None
    expectations: list[Expectation] = field(default_factory=list)
    once: bool = False
    comment: str | None = None
    location: str | None = None


def _databricks_clauses(spark: SparkSession, statement: Statement, blanked: str,
                        flow: re.Match[str] | None) -> tuple[str, _Extras]:
    """The statement as Spark's grammar takes it, and what Databricks' own clauses said."""
    text, extras = list(statement.text), _Extras()

    def erase(start: int, end: int) -> None:
        for k in range(start, end):
            if text[k] != "\n":
                text[k] = " "

    dataset = _DATASET.match(blanked)
    if dataset:
        for group in ("or_refresh", "private"):
            if dataset.group(group):
                erase(dataset.start(group), dataset.end(group))
        extras.private = bool(dataset.group("private"))
        if dataset.group("columns"):
            open_at = dataset.start("columns")
            close = closing(blanked, open_at)
            if close < 0:
                raise statement.error("the column list has no closing parenthesis")
            _expectations(statement, blanked, open_at, close, erase, extras)
            columns = "".join(text[open_at + 1:close]).strip()
            if columns:
                extras.schema = columns
            else:  # only expectations: no column list for Spark
                erase(open_at, close + 1)
        # LOCATION, which Databricks documents and Spark's pipeline grammar refuses.
        location = _LOCATION.search(blanked, dataset.end(), _query_as(blanked, dataset.end()))
        if location:
            extras.location = _string(spark, statement.text[location.start("path"):
                                                            location.end("path")])
            erase(location.start(), location.end())
    if flow:
        for once in ("once", "once_first"):
            if flow.group(once):
                erase(flow.start(once), flow.end(once))
                extras.once = True
        if flow.group("comment"):
            extras.comment = _flow_comment(spark, statement, flow)
            erase(flow.start("comment"), flow.end("comment"))
    return "".join(text), extras


def _query_as(blanked: str, start: int) -> int:
    """Where the `AS` before a dataset's query stands (outside parentheses), else the end."""
    depth = 0
    for match in re.finditer(r"[()]|\bAS\b", blanked[start:], re.I):
        token = match.group(0)
        depth += (token == "(") - (token == ")")
        if depth == 0 and token.upper() == "AS":
            return start + match.start()
    return len(blanked)


def _flow_comment(spark: SparkSession, statement: Statement, flow: re.Match[str]) -> str | None:
    """CREATE FLOW's `COMMENT '...'` (an append or an AUTO CDC flow's), as its string."""
    if not flow.group("comment"):
        return None
    literal = statement.text[flow.start("comment"):flow.end("comment")].strip()
    return _string(spark, literal[len("COMMENT"):].strip())


def _string(spark: SparkSession, literal: str) -> str:
    """A SQL string literal's value, as Spark reads it."""
    return str(_parser(spark).parseExpression(literal).eval(None))


def _expectations(statement: Statement, blanked: str, open_at: int, close: int, erase: Any,
                  extras: _Extras) -> None:
    """Each CONSTRAINT ... EXPECT of the column list read and erased, with a comma beside it."""
    position = open_at + 1
    while (found := _CONSTRAINT.search(blanked, position, close)) is not None:
        end = closing(blanked, found.end() - 1)
        condition = statement.text[found.end():end].strip()
        action, after = WARN, end + 1
        violation = _VIOLATION.match(blanked, after)
        if violation:
            action = DROP if violation.group("action").upper().startswith("DROP") else FAIL
            after = violation.end()
        start = found.start()
        comma = re.match(r"\s*,", blanked[after:close])
        if comma:
            after += comma.end()
        else:
            before = blanked[open_at + 1:start].rstrip()
            if before.endswith(","):
                start = open_at + 1 + len(before) - 1
        extras.expectations.append(Expectation(found.group("name").strip("`"), condition,
                                               action))
        erase(start, after)
        position = after


def _declared(statement: Statement, text: str, plan: Any, extras: _Extras) -> Declared:
    kind = str(plan.getClass().getSimpleName())
    if kind in ("CreateStreamingTableAsSelect", "CreateStreamingTable",
                "CreateMaterializedViewAsSelect"):
        return _table(statement, text, plan, kind, extras)
    if kind == "CreateViewCommand":
        return _temporary_view(statement, text, plan, extras)
    if kind == "CreateView":
        return _published_view(statement, text, plan, extras)
    if kind == "CreateFlowCommand":
        return _insert_flow(statement, text, plan, extras)
    if kind == "SetCommand" and plan.kv().isDefined() and plan.kv().get()._2().isDefined():
        pair = plan.kv().get()
        return SetConf(str(pair._1()), str(pair._2().get()))
    raise statement.error("is not a statement of a pipeline SQL file (CREATE STREAMING TABLE, "
                          "CREATE MATERIALIZED VIEW, CREATE TEMPORARY VIEW, CREATE FLOW, "
                          "AUTO CDC / APPLY CHANGES INTO, SET key = value)")


def _table(statement: Statement, text: str, plan: Any, kind: str, extras: _Extras) -> Dataset:
    name = _dataset_name(_strings(plan.name().nameParts()))
    spec = plan.tableSpec()
    provider = _option(spec.provider())
    if provider is not None and provider.lower() != "delta":
        raise statement.error(f"USING {provider}: a pipeline's tables are Delta tables",
                              dataset=name)
    if spec.options().size() > 0:
        raise statement.error("OPTIONS are not supported by the local runtime", dataset=name)
    partitions, clustering = [], []
    transforms = plan.partitioning()
    for i in range(transforms.length()):
        transform = transforms.apply(i)
        columns = [".".join(ref.fieldNames()) for ref in transform.references()]
        transform_kind = str(transform.getClass().getSimpleName())
        if transform_kind == "IdentityTransform":
            partitions += columns
        elif transform_kind == "ClusterByTransform":
            clustering += columns
        else:
            raise statement.error(f"PARTITIONED BY {transform.describe()}: partition by "
                                  "columns", dataset=name)
    streaming = kind != "CreateMaterializedViewAsSelect"
    query = None if kind == "CreateStreamingTable" else query_of(
        statement, text, plan.query(), query_start(text, str(plan.originalText())))
    return Dataset(
        kind=STREAMING_TABLE if streaming else MATERIALIZED_VIEW, name=name, query=query,
        private=extras.private, comment=_option(spec.comment()),
        properties=_map(spec.properties()), partition_cols=partitions or None,
        cluster_by=clustering or None, schema=extras.schema, path=extras.location,
        expectations=tuple(extras.expectations))


def _temporary_view(statement: Statement, text: str, plan: Any, extras: _Extras) -> Dataset:
    name = _dataset_name([str(plan.name().table())])
    if str(plan.viewType().toString()) != "LocalTempView":
        raise statement.error("a pipeline's temporary views are CREATE TEMPORARY VIEW",
                              dataset=name)
    if plan.userSpecifiedColumns().length() > 0:
        raise statement.error("a column list on a temporary view is not supported by the "
                              "local runtime", dataset=name)
    if plan.properties().size() > 0:
        raise statement.error("TBLPROPERTIES on a temporary view are not supported by the "
                              "local runtime", dataset=name)
    start = query_start(text, _option(plan.originalText()))
    return Dataset(kind=TEMPORARY_VIEW, name=name, comment=_option(plan.comment()),
                   query=query_of(statement, text, plan.plan(), start))


def _published_view(statement: Statement, text: str, plan: Any, extras: _Extras) -> Dataset:
    """CREATE VIEW: "a virtual table with no physical data", published in the pipeline's schema
    (https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-view): COMMENT and
    TBLPROPERTIES; no column list (and no expectations: `_REFUSED`)."""
    name = _dataset_name(_strings(plan.child().nameParts()))
    if plan.userSpecifiedColumns().length() > 0:
        raise statement.error("a column list on a view is not supported by the local runtime",
                              dataset=name)
    start = query_start(text, _option(plan.originalText()))
    return Dataset(kind=VIEW, name=name, comment=_option(plan.comment()),
                   properties=_map(plan.properties()),
                   query=query_of(statement, text, plan.query(), start))


def _insert_flow(statement: Statement, text: str, plan: Any, extras: _Extras) -> InsertFlow:
    name = _flow_name(statement, _strings(plan.name().nameParts()))
    insert = plan.flowOperation()
    if str(insert.getClass().getSimpleName()) != "InsertIntoStatement":
        raise statement.error("a flow is INSERT INTO or AUTO CDC INTO")
    table = insert.table()
    target = _dataset_name(_strings(table.multipartIdentifier()))
    if not insert.byName():
        raise statement.error(f"a flow inserts BY NAME (INSERT INTO {target} BY NAME query)")
    if insert.overwrite() or insert.partitionSpec().size() > 0 \
            or insert.userSpecifiedCols().length() > 0 or insert.ifPartitionNotExists():
        raise statement.error(f"a flow is INSERT INTO [ONCE] {target} BY NAME query, without "
                              "OVERWRITE, partitions or columns")
    start = query_start(text, None, after=int(insert.origin().stopIndex().get()) + 1)
    return InsertFlow(name=name, target=target, query=query_of(statement, text, insert.query(),
                                                               start),
                      once=extras.once, comment=extras.comment)


def _dataset_name(parts: list[str]) -> str:
    """A dataset's name of one to three parts, as written (`LIVE.` dropped): the graph reads it
    against the pipeline's catalog and schema (registry.py)."""
    if len(parts) == 2 and parts[0].lower() == "live":
        return parts[1]
    return parts[0] if len(parts) == 1 else ".".join(quoted(p) for p in parts)


def _flow_name(statement: Statement, parts: list[str]) -> str:
    if len(parts) != 1:
        raise statement.error(f"`{'.'.join(parts)}`: a flow's name has one part")
    return parts[0]


def _located(message: str, statement: Statement) -> str:
    """Spark's `(line N, pos M)`, counted in the statement, as the file's line."""
    return re.sub(r"\(line (\d+), pos (\d+)\)",
                  lambda m: f"(line {int(m.group(1)) + statement.line - 1}, pos {m.group(2)})",
                  message)


def _parser(spark: SparkSession) -> Any:
    """Spark's own SQL parser. Not the session's: Delta's, in front of it, rewrites CLUSTER BY
    into PARTITIONED BY in the text it hands Spark's (and the positions in it move)."""
    jvm: Any = spark.sparkContext._jvm
    return jvm.org.apache.spark.sql.execution.SparkSqlParser()


def _strings(seq: Any) -> list[str]:
    return [str(seq.apply(i)) for i in range(seq.length())]


def _option(value: Any) -> str | None:
    return str(value.get()) if value.isDefined() else None


def _map(scala_map: Any) -> dict[str, str]:
    entries, result = scala_map.toList(), {}
    for i in range(entries.length()):
        pair = entries.apply(i)
        result[str(pair._1())] = str(pair._2())
    return result
