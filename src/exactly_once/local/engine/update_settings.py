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

**A state snapshot when one is due** (RocksDB changelog checkpointing off for that update).
Commits write changelogs, and Spark writes snapshots only from a background task that an
update's short queries never give a chance (storage/state_store.py). When a store has gone
`spark.sql.streaming.stateStore.minDeltasForSnapshot` versions (10) without one, the update
runs with changelog checkpointing off: each store's commit then writes a snapshot, and the
next updates write changelogs on top of it. Databricks documents switching the setting on an
existing stream, state kept; a load then replays at most that many changelogs.

The settings are the session's, so a query of the user's running in another thread during an
update runs with them too. Updates that overlap in one session (of two warehouses) share the
settings of the first, and the session's own come back when the last one ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

FACTORY_MODE = "spark.sql.codegen.factoryMode"
CHANGELOG_CHECKPOINTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
MIN_DELTAS_FOR_SNAPSHOT = "spark.sql.streaming.stateStore.minDeltasForSnapshot"

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
    session = str(spark._jsparkSession.hashCode())
    with _lock:
        for key, value in settings.items():
            entry = _open.setdefault((session, key), [0, spark.conf.get(key, None)])
            if entry[0] == 0:
                spark.conf.set(key, value)
            entry[0] += 1
    try:
        yield
    finally:
        with _lock:
            for key in settings:
                entry = _open[(session, key)]
                entry[0] -= 1
                if entry[0] == 0:
                    del _open[(session, key)]
                    if entry[1] is None:
                        spark.conf.unset(key)
                    else:
                        spark.conf.set(key, entry[1])


def compiled_classes(spark: Any) -> int:
    """Classes Spark has generated and compiled (Janino) in this JVM so far."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())
