"""Session settings a pipeline update runs with, and the session's own back once it ends.

**Interpreted expressions** (`spark.sql.codegen.factoryMode` NO_CODEGEN). With Spark's default
(FALLBACK) every projection, predicate and encoder of every task first generates its Java
source, strips it with regular expressions and looks it up in a cache of 100 compiled classes,
which Janino fills when it misses. An update of the pipeline is many small queries (a dozen
streaming flows, their MERGEs, Delta's own typed queries over its log) whose tasks see a few
hundred rows: generating the code cost more than running it. A warm update of ~100 records
compiled about 460 classes and code generation was 43% of the driver JVM's Java samples;
interpreted, it compiles none (but for the few Spark paths that call a generator directly,
once per JVM and schema), and the update takes about half the JVM CPU (BENCHMARKS.md, issue 25).
Only while an update runs: Spark 4.2's interpreted deserializer cannot build some classes
(`spark.catalog.listTables()` fails with EXPRESSION_DECODING_FAILED: `NewInstance` of
`catalog.Table` gets an argument of the wrong type), so outside updates the session a user
holds keeps its own setting (issue 29).

**Generated code for a large micro-batch.** Interpreted expressions pay per row what generated
code pays per query (and, in a new process, per class it compiles first): silver's parse and its
Delta append of 4,000-64,000 bronze rows cost 0.73-0.76 of interpreted as generated code in a
warm session, 1.03-1.05 at 200-1,000. A streaming query's micro-batch that reads
GENERATED_CODE_FROM_BYTES or more, by Spark's estimate (the files of a Delta or file source's
batch, scaled to the columns it keeps), runs its expressions as generated code (`factoryMode`
FALLBACK, Spark's default) in the query's own session, set before the batch's writes run its
tasks; a smaller one, and one whose source gives no estimate (a Kafka batch), interpreted
(`batch_expressions`). The batch's plan was made before the handler sees it, so whole-stage
code generation stays off. The same rows either way: only the cost moves.

**A state snapshot when one is due** (RocksDB changelog checkpointing off for that update).
Commits write changelogs, and Spark writes snapshots only from a background task that an
update's short queries never give a chance (storage/state_store.py). When a store has gone
`spark.sql.streaming.stateStore.minDeltasForSnapshot` versions (10) without one, the update
runs with changelog checkpointing off: each store's commit then writes a snapshot, and the
next updates write changelogs on top of it. Databricks documents switching the setting on an
existing stream, state kept; a load then replays at most that many changelogs.

**The pipeline's configuration** (conf/'s `configuration:`, `run --conf`: Databricks' pipeline
parameters, settings/configuration.py) is in the session for the update too, from before its
files load: `spark.conf.get("mypipeline.startDate")` reads it at load and inside flows. A key the
runtime owns (conf/'s `exactly_once.*` settings, the settings above, and those the session was
built with) is refused, before any is set.

The settings are the session's, so a query of the user's running in another thread during an
update runs with them too. Updates that overlap in one session (of two warehouses) share the
settings of the first, and the session's own come back when the last one ends; a configuration
key two overlapping updates set to different values is an error for the second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any

from exactly_once.errors import SettingsError, first_line
from exactly_once.settings.configuration import check_key

FACTORY_MODE = "spark.sql.codegen.factoryMode"
CHANGELOG_CHECKPOINTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
MIN_DELTAS_FOR_SNAPSHOT = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
UPDATE_SETTINGS = (FACTORY_MODE, CHANGELOG_CHECKPOINTING)  # what `for_update` may set

_lock = threading.Lock()
# (session, setting) -> [updates inside the scope, the session's own value (None: unset)]
_open: dict[tuple[str, str], list[Any]] = {}


def for_update(snapshot_state: bool = False) -> dict[str, str]:
    """The settings of an update; `snapshot_state`: its state stores write snapshots."""
    settings = {FACTORY_MODE: "NO_CODEGEN"}
    if snapshot_state:
        settings[CHANGELOG_CHECKPOINTING] = "false"
    return settings


def snapshot_every(spark: Any) -> int:
    """Versions a state store may commit as changelogs before an update snapshots it."""
    return int(spark.conf.get(MIN_DELTAS_FOR_SNAPSHOT, "10"))


@contextmanager
def applied(spark: Any, settings: Mapping[str, str]) -> Iterator[None]:
    """`settings` in `spark`'s session until the block ends."""
    with _held(spark, settings, partial(_take, spark)):
        yield


@contextmanager
def set_for_block(session: Any, settings: Mapping[str, str]) -> Iterator[None]:
    """`settings` in `session` for the block, then the session's own values back (unset where it
    had none). For a session no other block holds settings in at the same time (a streaming
    query's own, a command's output), where `applied` counts the updates that overlap: a value
    set here, a MERGE's commit marker say, is always this block's."""
    own = {key: session.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        session.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in own.items():
            if previous is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, previous)


@contextmanager
def configured(spark: Any, configuration: Mapping[str, str]) -> Iterator[None]:
    """The pipeline's configuration (settings/configuration.py) in `spark`'s session until the
    block ends, as Databricks gives an update's session its pipeline's `configuration`. A key
    the runtime owns, or one Spark cannot set at runtime, is a SettingsError before any is set;
    an update running beside this one in the session with another value for a key too."""
    check_configuration(spark, configuration)

    def take(session: str, key: str, value: str) -> None:
        entry = _open.get((session, key))
        if entry is not None and spark.conf.get(key, None) != value:
            raise SettingsError(f"configuration key {key}: an update running in this "
                                f"session has it set to {spark.conf.get(key, None)!r}")
        try:
            _take(spark, session, key, value)
        except Exception as err:  # noqa: BLE001 - Spark's refusal, as one line
            raise SettingsError(f"configuration key {key}: {first_line(err)}") from None

    with _held(spark, configuration, take):
        yield


@contextmanager
def _held(spark: Any, settings: Mapping[str, str],
          take: Callable[[str, str, str], None]) -> Iterator[None]:
    """Each of `settings` taken in `spark`'s session (`take(session, key, value)`), and those
    taken released when the block ends or a later one fails."""
    session = str(spark._jsparkSession.hashCode())
    taken: list[str] = []
    try:
        with _lock:
            for key, value in settings.items():
                take(session, key, value)
                taken.append(key)
        yield
    finally:
        with _lock:
            for key in taken:
                _release(spark, session, key)


def check_configuration(spark: Any, configuration: Mapping[str, str]) -> None:
    """Refuse a configuration key the runtime owns: conf/'s own settings, the settings of an
    update (above) and every setting the session was built with (engine/session.py, and what
    Spark itself records there: the master, the jars, the time zone the runtime relies on...)."""
    # The context's own conf: `getConf()` copies every entry, two py4j calls each, into a new
    # SparkConf (about 400 calls, on every update).
    built_with = spark.sparkContext._conf
    for key in configuration:
        check_key(key)
        if key in UPDATE_SETTINGS:
            raise SettingsError(f"configuration key {key}: the local runtime sets it for each "
                                "update; it cannot be configured")
        if built_with.contains(key):
            raise SettingsError(f"configuration key {key}: the local runtime sets it on its "
                                "session; it cannot be configured")


def _take(spark: Any, session: str, key: str, value: str) -> None:
    """One more update holds `key` in the session; the first sets it, keeping the session's own
    value (None: unset) for the last to put back."""
    entry = _open.get((session, key))
    if entry is None:
        entry = [0, spark.conf.get(key, None)]
        spark.conf.set(key, value)
        _open[(session, key)] = entry
    entry[0] += 1


def _release(spark: Any, session: str, key: str) -> None:
    entry = _open[(session, key)]
    entry[0] -= 1
    if entry[0] == 0:
        del _open[(session, key)]
        if entry[1] is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, entry[1])


# The smallest micro-batch, in Spark's estimate of the bytes it reads, whose expressions run as
# generated code: about 16,000 bronze rows for a parse, 850 records of a kcat file for bronze.
# With its classes compiled, generated code pays from about 4,000 bronze rows; a new process
# compiles every class first, which `make demo`'s 6,300 records (bronze's batch generated) and
# 30,000 events absorbed (BENCHMARKS.md, "Generated code for a large micro-batch").
GENERATED_CODE_FROM_BYTES = 1 << 20
# Past this, an estimate is Spark's default for a source without statistics
# (`spark.sql.defaultSizeInBytes`, scaled by the plan's projections), not a measure.
UNKNOWN_SIZE_FROM_BYTES = 1 << 40


def input_bytes(batch: Any) -> int:
    """The bytes a micro-batch reads, as Spark estimates them: its plan is the planned batch
    (`foreachBatch` hands over a `LogicalRDD`), whose statistics are the batch's own."""
    return int(batch._jdf.queryExecution().analyzed().stats().sizeInBytes())


@contextmanager
def batch_expressions(batch: Any) -> Iterator[bool]:
    """`batch`'s expressions for the block (the module's "Generated code for a large
    micro-batch"): generated code in its query's own session when it is large, that session's
    value back after (`set_for_block`); yields whether it runs generated code."""
    if not GENERATED_CODE_FROM_BYTES <= input_bytes(batch) < UNKNOWN_SIZE_FROM_BYTES:
        yield False
        return
    with set_for_block(batch.sparkSession, {FACTORY_MODE: "FALLBACK"}):
        yield True


def compiled_classes(spark: Any) -> int:
    """Classes Spark has generated and compiled (Janino) in this JVM so far."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())
