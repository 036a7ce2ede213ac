"""How a pipeline update evaluates expressions: interpreted, not compiled to Java classes.

With Spark's default (`spark.sql.codegen.factoryMode` FALLBACK) every projection, predicate and
encoder of every task first generates its Java source, strips it with regular expressions and
looks it up in a cache of 100 compiled classes, which Janino fills when it misses. An update of
the pipeline is many small queries (a dozen streaming flows, their MERGEs, Delta's own typed
queries over its log) whose tasks see a few hundred rows: generating the code cost more than
running it. A warm update of ~100 records compiled about 460 classes, and code generation was
43% of the driver JVM's Java samples; interpreted, it compiles none, and the update takes about
half the JVM CPU (BENCHMARKS.md, issue 25).

Only while an update runs: Spark 4.2's interpreted deserializer cannot build some classes
(`spark.catalog.listTables()` fails with EXPRESSION_DECODING_FAILED: `NewInstance` of
`catalog.Table` gets an argument of the wrong type), so the session a user holds keeps its own
setting outside updates (issue 29). The setting is the session's, so a query of the user's
running in another thread during an update is interpreted too. Overlapping updates in one
session (of two warehouses) restore it when the last one ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FACTORY_MODE = "spark.sql.codegen.factoryMode"
INTERPRETED = "NO_CODEGEN"

_lock = threading.Lock()
# Per session (its JVM object's id): updates inside the scope, and the setting to restore.
_open: dict[str, tuple[int, str | None]] = {}


@contextmanager
def interpreted_expressions(spark: Any) -> Iterator[None]:
    """Expressions of queries run in `spark` are interpreted until the block ends."""
    key = str(spark._jsparkSession.hashCode())
    with _lock:
        depth, saved = _open.get(key, (0, spark.conf.get(FACTORY_MODE, None)))
        if depth == 0:
            spark.conf.set(FACTORY_MODE, INTERPRETED)
        _open[key] = (depth + 1, saved)
    try:
        yield
    finally:
        with _lock:
            depth, saved = _open.pop(key)
            if depth > 1:
                _open[key] = (depth - 1, saved)
            elif saved is None:
                spark.conf.unset(FACTORY_MODE)
            else:
                spark.conf.set(FACTORY_MODE, saved)


def compiled_classes(spark: Any) -> int:
    """Classes Spark has generated and compiled (Janino) in this JVM so far."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())
