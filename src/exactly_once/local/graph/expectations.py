"""Databricks pipeline expectations for the local runtime: the decorators and their evaluation.

On Databricks `dp.expect*` are native. Open-source pyspark has none, so while pipeline files load
(`dp_extensions.installed()`) these versions record each expectation on the query function,
which `dp.table` / `dp.append_flow` / `dp.materialized_view` / `dp.temporary_view` keep as
`Flow.func`; `dp.create_streaming_table(expect_all=...)` adds its own to every flow into the table
(`with_expectations`, when the graph completes). Every dataset kind takes them: a streaming
table's and a materialized view's flow apply them to what they write, a temporary view's apply
to its query wherever it is read (counted by the reading flow). The runtime wraps the flow's
DataFrame with `apply_expectations`:

* every constraint becomes a boolean; NULL counts as a failure (as on Databricks);
* one `observe()` counts, in the same pass that writes the data, the rows each constraint passed
  and failed and the rows dropped: per micro-batch for streams (StreamingQueryProgress
  `observedMetrics`), once for a batch write (`Observation`);
* `warn` keeps the row, `drop` filters it out, `fail` raises inside the query (`raise_error`), so
  the micro-batch or batch write aborts before its Delta commit and the target stays unchanged.
  The error names the expectation, the dataset and the failing record.

An expectation declared wrongly (a decorator given the wrong arguments or written above
`@dp.table`, a name twice, a constraint that does not parse) is an `ExpectationError` naming the
dataset, found when the graph completes (`declaration_problems`): only then is the dataset of a
decorated function known.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import PySparkRuntimeError
from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from exactly_once.errors import ExpectationError, first_line
from exactly_once.local.engine.sql_columns import struct_of
from exactly_once.local.engine.sql_parser import parse_error

WARN, DROP, FAIL = "warn", "drop", "fail"
ATTRIBUTE = "_expectations"  # on the query function: list[Expectation], in declaration order
MISTAKES = "_expectation_mistakes"  # on the query function: what its decorators were given wrongly
_FAILURE = re.compile(r"\[USER_RAISED_EXCEPTION\] (expectation `[^`]+` on dataset `[^`]+` failed "
                      r"for record: .*?)(?: SQLSTATE: \w+)?$", re.MULTILINE)
_ids = itertools.count()


@dataclass(frozen=True)
class Expectation:
    name: str
    constraint: str  # SQL boolean expression
    action: str  # warn | drop | fail


@dataclass
class ExpectationMetric:
    """What Databricks reports per expectation per flow update."""

    name: str
    dataset: str
    passed_records: int = 0
    failed_records: int = 0


# -- the decorators (same signatures as Databricks) --------------------------------------------
QueryFunction = Callable[..., Any]  # what @dp.table and friends decorate
Decorator = Callable[[QueryFunction], QueryFunction]


def _decorator(expectations: list[Expectation], mistake: str | None = None) -> Decorator:
    """Records `expectations` on the function, or the `mistake` its decorator was given: the
    function's dataset, which the error names, is known once @dp.table has registered it."""
    def decorate(func: QueryFunction) -> QueryFunction:
        if not callable(func):
            raise ExpectationError("expectation decorators go below @dp.table / "
                                   "@dp.materialized_view / @dp.append_flow, on the function",
                                   dataset=_registered_last())
        # Decorators apply bottom-up; keep the order they are written in.
        setattr(func, ATTRIBUTE, [*expectations, *declared(func)])
        if mistake is not None:
            setattr(func, MISTAKES, [mistake, *getattr(func, MISTAKES, [])])
        return func

    return decorate


def _registered_last() -> str | None:
    """The dataset of the flow registered last while files load. A decorator written above
    @dp.table is given what @dp.table returned (None), right after @dp.table registered the
    flow of the function below it."""
    try:
        flows = getattr(get_active_graph_element_registry(), "flows", [])
    except PySparkRuntimeError:  # no pipeline file loading: a decorator applied by hand
        return None
    return flows[-1].target if flows else None


def _one(name: str, constraint: str, action: str) -> Decorator:
    return _decorator([Expectation(name, constraint, action)])


def _all(expectations: Mapping[str, str], action: str) -> Decorator:
    if not isinstance(expectations, Mapping):
        return _decorator([], "expect_all* takes a dict of name -> SQL constraint")
    return _decorator([Expectation(n, c, action) for n, c in expectations.items()])


def expect(description: str, constraint: str) -> Decorator:
    return _one(description, constraint, WARN)


def expect_or_drop(description: str, constraint: str) -> Decorator:
    return _one(description, constraint, DROP)


def expect_or_fail(description: str, constraint: str) -> Decorator:
    return _one(description, constraint, FAIL)


def expect_all(expectations: Mapping[str, str]) -> Decorator:
    return _all(expectations, WARN)


def expect_all_or_drop(expectations: Mapping[str, str]) -> Decorator:
    return _all(expectations, DROP)


def expect_all_or_fail(expectations: Mapping[str, str]) -> Decorator:
    return _all(expectations, FAIL)


DECORATORS = {f.__name__: f for f in (expect, expect_or_drop, expect_or_fail, expect_all,
                                      expect_all_or_drop, expect_all_or_fail)}


def declared(func: QueryFunction) -> list[Expectation]:
    return list(getattr(func, ATTRIBUTE, []) or [])


def with_expectations(func: QueryFunction, expectations: Sequence[Expectation]) -> QueryFunction:
    """`func`'s query with `expectations` after its own (a streaming table's `expect_all*`, on
    each flow into it); `func` itself unchanged, as another flow may use it too."""
    @functools.wraps(func)  # its name, and its expectations and mistakes, copied
    def query() -> Any:
        return func()

    setattr(query, ATTRIBUTE, [*declared(func), *expectations])
    return query


def declaration_problems(func: QueryFunction, dataset: str) -> list[ExpectationError]:
    """What is wrong with the expectations on `func`, the query of `dataset`, found without
    reading data: what its decorators were given wrongly, a name twice, a constraint that does
    not parse. Whether a constraint analyzes against the query is the query's analysis
    (`dry-run`)."""
    problems = [ExpectationError(m, dataset=dataset) for m in getattr(func, MISTAKES, [])]
    expectations = declared(func)
    names = [e.name for e in expectations]
    if len(set(names)) != len(names):
        problems.append(ExpectationError(
            f"dataset `{dataset}` declares an expectation name twice: {names}", dataset=dataset))
    for e in expectations:
        if not isinstance(e.constraint, str):
            problems.append(ExpectationError(
                f"expectation `{e.name}`: its constraint must be SQL text, got "
                f"{e.constraint!r}", dataset=dataset))
            continue
        error = parse_error(e.constraint)
        if error is not None:
            problems.append(ExpectationError(
                f"expectation `{e.name}` ({e.constraint!r}) does not analyze: "
                f"{first_line(error)}", dataset=dataset))
    return problems


# -- evaluation --------------------------------------------------------------------------------
@dataclass
class ObservedExpectations:
    """The expectations applied to one DataFrame and where their counts will appear."""

    name: str  # observed-metric name (streaming progress `observedMetrics` key)
    dataset: str
    expectations: list[Expectation]
    observation: Observation | None = None  # batch queries only
    metrics: list[ExpectationMetric] = field(default_factory=list)
    dropped_records: int = 0

    def collect(self, observed: Mapping[str, Mapping[str, int]] | None = None) -> None:
        """Fill the metrics from summed streaming `observedMetrics`, or from the Observation."""
        if self.observation is not None:
            values = dict(self.observation.get)
        else:
            values = dict((observed or {}).get(self.name, {}))
        total = int(values.get("total", 0) or 0)
        self.dropped_records = int(values.get("dropped", 0) or 0)
        self.metrics = []
        for i, e in enumerate(self.expectations):
            failed = int(values.get(f"failed_{i}", 0) or 0)
            self.metrics.append(ExpectationMetric(e.name, self.dataset, total - failed, failed))


def apply_expectations(df: DataFrame, expectations: list[Expectation],
                       dataset: str) -> tuple[DataFrame, ObservedExpectations | None]:
    """`df` with the expectations enforced and counted; None when there are none.

    Built as SQL text (engine/sql_columns.py): a flow's query is built every update, and each
    expectation as Columns was about ten py4j calls. A constraint is its own line in that
    text, so a `--` comment in it ends where it does."""
    if not expectations:
        return df, None
    columns = df.columns
    # Names unique and constraints parsed: checked when the graph completed.
    flags = [(f"__expect_{i}", e) for i, e in enumerate(expectations)]
    checked = df.select("*", *[F.expr(f"coalesce((\n{e.constraint}\n), false) AS {col}")
                               for col, e in flags])
    drop_ok = " AND ".join(col for col, e in flags if e.action == DROP) or "true"

    name = f"expectations_{dataset}_{next(_ids)}"
    metrics = [F.expr("count(1) AS total"),
               *[F.expr(f"count_if(NOT {col}) AS failed_{i}") for i, (col, _) in
                 enumerate(flags)],
               F.expr(f"count_if(NOT ({drop_ok})) AS dropped")]
    observed = ObservedExpectations(name, dataset, list(expectations))
    if df.isStreaming:
        checked = checked.observe(name, *metrics)
    else:
        observed.observation = Observation(name)
        checked = checked.observe(observed.observation, *metrics)

    fails = [(col, e) for col, e in flags if e.action == FAIL]
    if fails:
        failed_name = F.coalesce(*[F.when(~F.col(col), F.lit(e.name)) for col, e in fails])
        record = F.to_json(struct_of(columns))
        message = F.concat(F.lit("expectation `"), failed_name,
                           F.lit(f"` on dataset `{dataset}` failed for record: "), record)
        checked = checked.where(F.when(failed_name.isNotNull(), F.raise_error(message))
                                .otherwise(F.lit(True)))
    if any(e.action == DROP for e in expectations):
        checked = checked.where(F.expr(drop_ok))
    return checked.drop(*[col for col, _ in flags]), observed


def failure_message(err: BaseException) -> str | None:
    """The expectation failure inside a (streaming) query error, if that is what stopped it."""
    match = _FAILURE.search(error_text(err))
    return match.group(1) if match else None


def error_text(err: BaseException) -> str:
    """Everything an error says: its message, its causes', and the JVM causes behind them."""
    texts, seen = [], set()
    pending: list[BaseException | None] = [err]
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        texts += [str(e), str(getattr(e, "_stackTrace", "") or "")]
        pending += [getattr(e, "__cause__", None), getattr(e, "__context__", None)]
        java = getattr(e, "_origin", None)  # py4j: walk the JVM cause chain
        for _ in range(20):
            if java is None:
                break
            try:
                texts.append(str(java.toString()))
                java = java.getCause()
            except Exception:
                break
    return "\n".join(texts)
