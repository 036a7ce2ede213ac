"""The session pipeline code sees, on whichever thread runs it, as on Databricks.

Pipeline files run with `spark` as a global, and their functions run later, each table's flows
in a thread of its own (execution/update.py). On Databricks a flow's code finds its session
however it asks: the `spark` global, `SparkSession.getActiveSession()` (Databricks' own AUTO CDC
FROM SNAPSHOT examples build their snapshots with it) or `SparkSession.builder.getOrCreate()`.
Classic PySpark keeps the active session per JVM thread, and a new thread has none; and a flow
declared with `spark_conf` runs with those settings, which no other flow of the session may see
("A list of Spark configurations for the execution of this query",
https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-materialized-view).

    running(session)   the block runs pipeline code in `session`: on its thread the `spark`
                       global, getActiveSession() and builder.getOrCreate() all return it
    SessionView        the `spark` global of pipeline files: the session of the code the thread
                       runs, else the pipeline's own
    with_conf(...)     a flow's session: the pipeline's, or for a flow with `spark_conf` a clone
                       of it with those settings (Spark's cloneSession: its own SQL settings, the
                       same SparkContext, catalog and registered functions; about 60 ms with
                       its first query, paid only by such a flow)
    moved(df, ...)     a DataFrame analyzed in one session, continued in another (a temporary
                       view with `spark_conf`, read by a flow)

While any thread runs pipeline code, `getActiveSession` and `Builder.getOrCreate` are replaced
on pyspark's classes by versions that answer with that thread's session, and pyspark's own
answer on every other thread; they are put back when the last such block ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

_thread = threading.local()  # .session: the session of the pipeline code this thread runs
_lock = threading.Lock()
_running = 0  # blocks inside `running`, on every thread
_originals: dict[str, Any] = {}


def current(default: SparkSession) -> SparkSession:
    """The session of the pipeline code this thread runs, else `default`."""
    session: SparkSession | None = getattr(_thread, "session", None)
    return default if session is None else session


@contextmanager
def running(session: SparkSession) -> Iterator[None]:
    """Pipeline code in `session` on this thread until the block ends (blocks nest)."""
    sessions = SparkSession._get_j_spark_session_class(session._jvm)
    outer = getattr(_thread, "session", None)
    outer_active = sessions.getActiveSession()  # the JVM thread's own (a Scala Option)
    _thread.session = session
    sessions.setActiveSession(session._jsparkSession)  # what Spark's JVM code asks for too
    _install()
    try:
        yield
    finally:
        _uninstall()
        _thread.session = outer
        if outer_active.isDefined():
            sessions.setActiveSession(outer_active.get())
        else:
            sessions.clearActiveSession()


def with_conf(spark: SparkSession, conf: Mapping[str, Any] | None) -> SparkSession:
    """`spark`, or a clone of it with `conf` set when there is any. Spark's error when a key
    cannot be set at runtime (a static setting) propagates."""
    if not conf:
        return spark
    session = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
    for key, value in conf.items():
        session.conf.set(key, value)
    return session


def moved(df: DataFrame, session: SparkSession) -> DataFrame:
    """`df` continued in `session`: what it has analyzed stays as it was analyzed (a time
    zone it resolved, say), what is built on it is analyzed and run in `session`."""
    if df.sparkSession._jsparkSession.equals(session._jsparkSession):
        return df
    datasets = getattr(session._jvm, "org.apache.spark.sql.classic.Dataset")
    return DataFrame(datasets.ofRows(session._jsparkSession, df._jdf.logicalPlan()), session)


class SessionView(SparkSession):
    """`spark` in a pipeline file: every attribute is the attribute of the session of the
    pipeline code the reading thread runs (`running`), else of `pipeline`'s. A SparkSession to
    `isinstance`, so it goes wherever pyspark takes one."""

    def __init__(self, pipeline: SparkSession):  # noqa: D107 - nothing of SparkSession's own
        object.__setattr__(self, "_pipeline_session", pipeline)

    def __getattribute__(self, name: str) -> Any:
        return getattr(current(object.__getattribute__(self, "_pipeline_session")), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(current(object.__getattribute__(self, "_pipeline_session")), name, value)

    def __repr__(self) -> str:
        return repr(current(object.__getattribute__(self, "_pipeline_session")))


def _install() -> None:
    global _running
    with _lock:
        _running += 1
        if _running > 1:
            return
        _originals["getActiveSession"] = SparkSession.__dict__["getActiveSession"]
        _originals["getOrCreate"] = SparkSession.Builder.getOrCreate
        # Replacing these is the purpose here; the replacements keep pyspark's signatures.
        SparkSession.getActiveSession = classmethod(  # type: ignore[method-assign,assignment]
            _active_session)
        SparkSession.Builder.getOrCreate = _get_or_create  # type: ignore[method-assign,assignment]


def _uninstall() -> None:
    global _running
    with _lock:
        _running -= 1
        if _running > 0:
            return
        SparkSession.getActiveSession = _originals.pop(  # type: ignore[method-assign]
            "getActiveSession")
        SparkSession.Builder.getOrCreate = _originals.pop(  # type: ignore[method-assign]
            "getOrCreate")


def _active_session(cls: type[SparkSession]) -> SparkSession | None:
    session: SparkSession | None = getattr(_thread, "session", None)
    if session is not None:
        return session
    original: Any = _originals.get("getActiveSession") or SparkSession.__dict__["getActiveSession"]
    return original.__get__(None, cls)()


def _get_or_create(builder: SparkSession.Builder) -> SparkSession:
    """The thread's pipeline session, with the builder's settings applied to it as pyspark
    applies them to an existing session; elsewhere pyspark's own."""
    session: SparkSession | None = getattr(_thread, "session", None)
    if session is None:
        original: Any = _originals.get("getOrCreate") or SparkSession.Builder.getOrCreate
        return original(builder)
    module = SparkSession._get_j_spark_session_module(session._jvm)
    module.applyModifiableSettings(session._jsparkSession, dict(builder._options))
    return session
