"""The query of a pipeline SQL statement, and what it reads: found in the plan Spark's parser
makes of the statement (the pipeline grammar of Spark 4.1+: `STREAM(name)` / `STREAM name` a
streaming relation, `read_files(...)` a table-valued function), with where each read is written
in the query text.

When the flow runs (`build`), each read of a table or view is made as a Python flow makes it,
`spark.read.table(name)` or `spark.readStream.table(name)`, so the runtime resolves a pipeline
dataset exactly as it does for Python (reads.py: the pipeline updates it first, `LIVE.` is
dropped, a temporary view is inlined) and any other name in the catalog; the DataFrame is
given to the query under a temporary view name of its own, which replaces the read in the text.
`read_files(...)` is Auto Loader's `read_files` (auto_loader/reader.py): a batch read, or under
`STREAM` its stream.

`spark.sql(...)` in a Python dataset function reads the same way (`resolved_sql`): while an
update or a dry-run builds queries, each read its query makes of a name the pipeline's resolver
answers (reads.py: a dataset, with or without `LIVE.`, batch or `STREAM(name)`) is given to it
under a temporary view name of its own; every other name stays as written, for the catalog.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from pyspark.errors import ParseException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.sql_formatter import SQLStringFormatter

from exactly_once.local.auto_loader.reader import read_files
from exactly_once.local.engine.sql_parser import quiet_query_context
from exactly_once.local.graph.reads import Resolver, dataset_name
from exactly_once.local.graph.sql_files import BLANKS, Statement, closing, masked

_IDENTIFIER = r"(?:`[^`]*`|[A-Za-z_][\w]*)(?:\s*\.\s*(?:`[^`]*`|[A-Za-z_][\w]*))*"
_STREAM_READ = re.compile(rf"STREAM\s*(?:\(\s*{_IDENTIFIER}\s*\)|\s{_IDENTIFIER})", re.I)
_BATCH_READ = re.compile(_IDENTIFIER)
_FILES_READ = re.compile(r"(?:STREAM\s+)?read_files\s*\(", re.I)
_OPTIONS = re.compile(r"\s*WITH\s*\(", re.I)  # a table's options after its name
_SQL = SparkSession.sql  # pyspark's own, which a rewritten query runs with
# Plans that are statements of their own (DDL, DML, SET...), not a query to read from.
_STATEMENTS = ("org.apache.spark.sql.catalyst.plans.logical.Command",
               "org.apache.spark.sql.catalyst.plans.logical.ParsedStatement")


@dataclass(frozen=True)
class Read:
    """A read in the query text: characters [start, end) name `name`, a stream or not; `files`
    holds read_files' path and options when it is a `read_files(...)` call; `options` those of a
    table's `WITH ('key' = 'value', ...)`, whose clause ends at `options_end`."""

    start: int
    end: int
    name: str
    streaming: bool
    files: tuple[str, tuple[tuple[str, str], ...]] | None = None
    options: tuple[tuple[str, str], ...] = ()
    options_end: int | None = None


@dataclass(frozen=True)
class Query:
    """A statement's query as written, and its reads."""

    text: str
    reads: tuple[Read, ...]

    def build(self) -> DataFrame:
        """The query's DataFrame, in the session of the flow that runs it."""
        spark = SparkSession.getActiveSession()
        assert spark is not None, "a flow's query runs with its session active"
        return _run_reading(spark, self.text, self.reads, partial(_read, spark))

    def published_text(self) -> str | None:
        """The query as a view of the catalog keeps it: each read naming its dataset or table
        as published (`LIVE.` dropped); None when it reads a stream or files, which a view of
        the catalog cannot."""
        pieces, last = [], 0
        for read in self.reads:
            if read.streaming or read.files is not None:
                return None
            pieces += [self.text[last:read.start], dataset_name(read.name)]
            last = read.end
        return "".join([*pieces, self.text[last:]])

    def read_names(self) -> tuple[str, ...]:
        """The names the query reads, `LIVE.` dropped."""
        return tuple(dataset_name(r.name) for r in self.reads if r.files is None)


@contextmanager
def resolved_sql(resolve: Resolver) -> Iterator[None]:
    """While inside, `spark.sql(query)` asks `resolve` for each table or view its query reads
    (the resolver of reads.resolved_reads, which the block should be inside of): a name it
    answers is read from the DataFrame it gives, any other as Spark reads it. Statements that
    are not queries run as they are. pyspark's method is replaced on the class, as reads.py
    replaces the readers'."""

    def sql(self: SparkSession, sqlQuery: str, args: Any = None, **kwargs: Any) -> DataFrame:
        if kwargs:  # pyspark's `{name}` formatting first: a DataFrame becomes a view of its own
            formatter = SQLStringFormatter(self)
            try:
                return sql(self, formatter.format(sqlQuery, **kwargs), args)
            finally:
                formatter.clear()
        reads = _query_reads(self, sqlQuery)
        if not reads:
            return _SQL(self, sqlQuery, args)

        def frame(read: Read) -> DataFrame | None:
            return (_read(self, read) if read.files is not None
                    else resolve(dataset_name(read.name), read.streaming, dict(read.options)))

        return _run_reading(self, sqlQuery, reads, frame, args)

    # Replacing the method is the purpose here; the replacement has pyspark's signature.
    outer = SparkSession.sql
    SparkSession.sql = sql  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        SparkSession.sql = outer  # type: ignore[method-assign]


def _run_reading(spark: SparkSession, text: str, reads: tuple[Read, ...],
                 frame: Callable[[Read], DataFrame | None], args: Any = None) -> DataFrame:
    """`text` run by pyspark's `sql` (with `args`), each read that `frame` gives a DataFrame
    for replaced by a temporary view of it; a read it gives None for stays as written."""
    views: list[str] = []
    pieces, last = [], 0
    try:
        for read in reads:
            df = frame(read)
            if df is None:
                continue
            view = f"__pipeline_sql_{uuid.uuid4().hex}"
            df.createOrReplaceTempView(view)
            views.append(view)
            pieces += [text[last:read.start], view]  # its options are the DataFrame's
            last = read.end if read.options_end is None else read.options_end
        return _SQL(spark, "".join([*pieces, text[last:]]), args)
    finally:
        for view in views:  # the DataFrame keeps the plan each view stood for
            spark.catalog.dropTempView(view)


def _query_reads(spark: SparkSession, text: str) -> tuple[Read, ...]:
    """The reads of `text` when it is a query that parses (else none: Spark runs it as it is,
    and says what is wrong with it)."""
    session: Any = spark
    try:
        with quiet_query_context():
            plan = session._jsparkSession.sessionState().sqlParser().parsePlan(text)
    except ParseException:
        return ()
    jvm = session._jvm
    if any(jvm.java.lang.Class.forName(kind).isInstance(plan) for kind in _STATEMENTS):
        return ()
    return query_of(Statement(text, 1), text, plan, 0).reads


def _read(spark: SparkSession, read: Read) -> DataFrame:
    if read.files is not None:
        path, options = read.files
        return read_files(spark, path, dict(options), read.streaming)
    reader = spark.readStream if read.streaming else spark.read
    return reader.options(**dict(read.options)).table(read.name)


def query_of(statement: Statement, text: str, plan: Any, start: int) -> Query:
    """The query `plan` (parsed from `text`, the statement as Spark was given it, where the
    query begins at `start` and runs to the end) stands for, with its reads; what cannot be
    read locally is the statement's error."""
    end = len(text.rstrip())
    blanked = masked(text)
    found = _reads(statement, text, blanked, plan, _cte_names(plan))
    reads = sorted((r for r in found if r is not None), key=lambda r: r.start)
    if reads and reads[0].start < start:
        raise statement.error("a read lies before its query, where Spark's parser puts it")
    return Query(text[start:end], tuple(
        Read(r.start - start, r.end - start, r.name, r.streaming, r.files, r.options,
             None if r.options_end is None else r.options_end - start) for r in reads))


def query_start(text: str, original: str | None, after: int | None = None) -> int:
    """Where the query starts in `text`: where Spark's own copy of it (`originalText`) is, or
    the first word after position `after` (an INSERT INTO's `BY NAME`)."""
    if original is not None:
        found = text.rfind(original)
        if found >= 0:
            return found
    position = after if after is not None else 0
    lead = BLANKS.match(text, position)
    return lead.end() if lead else position


def _reads(statement: Statement, text: str, blanked: str, node: Any,
           ctes: set[str]) -> Iterator[Read | None]:
    kind = str(node.getClass().getSimpleName())
    if kind == "NamedStreamingRelation":
        yield _read_of(statement, text, blanked, node.child(), node, True, ctes)
        return
    if kind in ("UnresolvedRelation", "UnresolvedTableValuedFunction"):
        yield _read_of(statement, text, blanked, node, node, bool(
            kind == "UnresolvedRelation" and node.isStreaming()), ctes)
        return
    for children in (node.children(), node.innerChildren()):
        for i in range(children.length()):
            yield from _reads(statement, text, blanked, children.apply(i), ctes)


def _read_of(statement: Statement, text: str, blanked: str, relation: Any, located: Any,
             streaming: bool, ctes: set[str]) -> Read | None:
    start, stop = _span(located)
    if start is None or stop is None:
        raise statement.error("a read's position is unknown to Spark's parser")
    if str(relation.getClass().getSimpleName()) == "UnresolvedTableValuedFunction":
        parts = _strings(relation.name())
        if parts[-1].lower() != "read_files":
            return None  # range(), explode()...: Spark's own, nothing of the pipeline
        found = _FILES_READ.match(blanked, start)
        close = closing(blanked, found.end() - 1) if found else -1
        if found is None or close < 0:
            raise statement.error("read_files(...) is not where Spark's parser puts it")
        return Read(start, close + 1, "read_files", streaming,
                    _files_arguments(statement, relation))
    parts = _strings(relation.multipartIdentifier())
    if len(parts) == 1 and parts[0].lower() in ctes:
        return None  # a common table expression of the query
    pattern = _STREAM_READ if streaming else _BATCH_READ
    found = pattern.match(blanked, start)
    if found is None:
        raise statement.error(f"the read of `{'.'.join(parts)}` is not where Spark's parser "
                              "puts it")
    options = dict(relation.options().asCaseSensitiveMap())
    if not options:
        return Read(start, found.end(), _name(parts), streaming)
    clause = _OPTIONS.match(blanked, found.end())
    close = closing(blanked, clause.end() - 1) if clause else -1
    if clause is None or close < 0:
        raise statement.error(f"the options of `{'.'.join(parts)}` are not where Spark's "
                              "parser puts them")
    return Read(start, found.end(), _name(parts), streaming,
                options=tuple(sorted(options.items())), options_end=close + 1)


def _files_arguments(statement: Statement, relation: Any
                     ) -> tuple[str, tuple[tuple[str, str], ...]]:
    """read_files' path and options, each a literal (Databricks' read_files takes them so)."""
    args = relation.functionArgs()
    path, options = None, []
    for i in range(args.length()):
        arg = args.apply(i)
        kind = str(arg.getClass().getSimpleName())
        if kind == "NamedArgumentExpression":
            options.append((str(arg.key()), _literal(statement, arg.value())))
        elif path is None:
            path = _literal(statement, arg)
        else:
            raise statement.error("read_files takes one path, then options as name => value")
    if path is None:
        raise statement.error("read_files needs a path")
    return path, tuple(options)


def _literal(statement: Statement, expression: Any) -> str:
    if str(expression.getClass().getSimpleName()) != "Literal":
        raise statement.error(f"read_files takes literal arguments, got {expression.sql()}")
    return str(expression.value())


def _cte_names(plan: Any) -> set[str]:
    names: set[str] = set()
    if str(plan.getClass().getSimpleName()) == "UnresolvedWith":
        relations = plan.cteRelations()
        names |= {str(relations.apply(i)._1()).lower() for i in range(relations.length())}
    for children in (plan.children(), plan.innerChildren()):
        for i in range(children.length()):
            names |= _cte_names(children.apply(i))
    return names


def _name(parts: list[str]) -> str:
    """The name a Python flow would give `spark.read.table`: parts joined, quoted when needed."""
    return ".".join(p if re.fullmatch(r"[A-Za-z_]\w*", p) else f"`{p}`" for p in parts)


def _strings(seq: Any) -> list[str]:
    return [str(seq.apply(i)) for i in range(seq.length())]


def _span(node: Any) -> tuple[int | None, int | None]:
    origin = node.origin()
    start, stop = origin.startIndex(), origin.stopIndex()
    return (int(start.get()) if start.isDefined() else None,
            int(stop.get()) if stop.isDefined() else None)
