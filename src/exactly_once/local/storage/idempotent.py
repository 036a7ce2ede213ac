"""Delta writes that a replayed micro-batch does not repeat.

Structured Streaming runs a micro-batch again after a crash (`checkpoints.replayed_batch`). Each
write of a batch carries a `Marker` (writer, batch id) in its commit's userMetadata; a replayed
batch first looks for its marker in the table's log and skips a write that already committed.
A batch that is not a replay cannot have committed before, so it writes without looking.
"""

from __future__ import annotations

from collections.abc import Mapping

from delta.tables import DeltaMergeBuilder
from pyspark.sql import DataFrame, SparkSession

from exactly_once.local.engine.update_settings import set_for_block
from exactly_once.local.storage.delta_log import Marker, committed_batch
from exactly_once.local.storage.files import StoragePath

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
REPLACE_WHERE_CHECK = "spark.databricks.delta.replaceWhere.constraintCheck.enabled"
ADAPTIVE = "spark.sql.adaptive.enabled"


def already_committed(path: StoragePath | str, marker: Marker) -> bool:
    last = committed_batch(path, marker.writer)
    return last is not None and last >= marker.batch


def append(df: DataFrame, path: StoragePath | str, marker: Marker, replayed: bool,
           options: Mapping[str, str] | None = None) -> bool:
    """Append `df` to the Delta table at `path` unless a replayed batch already did; whether
    this call wrote it. `options`: more of Delta's writer options (a delta sink's own)."""
    if replayed and already_committed(path, marker):
        return False
    df.write.format("delta").mode("append").options(**(options or {})) \
        .option("userMetadata", marker.user_metadata()).save(str(path))
    return True


def replace(df: DataFrame, path: StoragePath | str, predicate: str, marker: Marker,
            replayed: bool) -> bool:
    """Replace the rows of the Delta table at `path` that match SQL `predicate` with `df`'s
    (Delta's replaceWhere: one commit) unless a replayed batch already did; whether this call
    wrote it. Every row of `df` must match `predicate`: Delta does not check it here.

    The setting goes through `df`'s session, as `merge`'s marker does: it must be the
    streaming query's own (each query has one), as flows run concurrently."""
    if replayed and already_committed(path, marker):
        return False
    # Delta would check each written row against `predicate`, an IN list evaluated as such:
    # rows times keys comparisons (25 s for 20,000 keys, against 5.5 s without the check).
    with set_for_block(df.sparkSession, {REPLACE_WHERE_CHECK: "false"}):
        df.write.format("delta").mode("overwrite").option("replaceWhere", predicate) \
            .option("userMetadata", marker.user_metadata()).save(str(path))
    return True


def merge(spark: SparkSession, merge: DeltaMergeBuilder, path: StoragePath | str, marker: Marker,
          replayed: bool) -> bool:
    """Execute the MERGE unless a replayed batch already committed it; whether this call did.

    The MERGE's source must already be materialized (a local checkpoint): Delta then reads it
    as it is instead of copying it first, a Spark job it only needs for a source that could
    change while the MERGE reads it twice.

    Without adaptive execution: a MERGE of a batch's few keys joins small sides, and adaptive
    execution ran each of its stages as a Spark job of its own (11 jobs for `orders`' MERGE in
    a warm update); off, the MERGE took 0.75-0.90 of its time and the update 0.89-0.96 of its
    JVM CPU (BENCHMARKS.md, "A small update").

    MERGE takes no writer options, so the marker goes through the session's settings: `spark`
    must be the streaming query's own session (each query has one), as flows run concurrently.
    """
    if replayed and already_committed(path, marker):
        return False
    with set_for_block(spark, {USER_METADATA: marker.user_metadata(),
                               MATERIALIZE_SOURCE: "none", ADAPTIVE: "false"}):
        merge.execute()
    return True
