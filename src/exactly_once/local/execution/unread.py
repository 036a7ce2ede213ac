"""Whether a streaming flow's query has anything to read (issue 58: a flow whose inputs have no
new data since its last update starts nothing).

An availableNow query whose sources are all Delta tables, each read to its latest version by the
query's last committed micro-batch, would start, find no new offsets and stop without a batch:
Spark runs a batch without data only right after a batch of the same run whose watermark left
state to expire, never at a start (`MicroBatchExecution.constructNextBatch` asks the previous
batch of that run). So it is not started, and its flow says SKIPPED.

The sources are the query plan's (a Delta table read by path: a `StreamingRelation` of Delta's
data source); where each stopped is its offset in the checkpoint
(`checkpoints.committed_offsets`), which names the table (`reservoirId`, the id in its metadata)
and the version to read next (`reservoirVersion`, at `index` -1: before its first file). The
query is started, as before, when anything else holds:
- a source is not a Delta table by path (Kafka, files, Auto Loader, a catalog table);
- a table's id is not the one the checkpoint read (recreated), or an offset stops inside a
  version, or the query has another number of sources than its checkpoint (Spark refuses
  that at start, as Databricks does);
- a table has a commit at or after the version to read next, even one without data;
- the last batch is logged but not committed (a restart runs it again).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pyspark.sql import DataFrame

from exactly_once.errors import ObjectStoreError
from exactly_once.local.execution import checkpoints
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.files import StoragePath, location

DELTA_SOURCES = ("delta", "org.apache.spark.sql.delta.sources.DeltaDataSource")
BEFORE_FIRST_FILE = -1  # a Delta offset's index between versions (DeltaSourceOffset.BASE_INDEX)


def nothing_unread(query: DataFrame, checkpoint: StoragePath) -> bool:
    """Whether `query`, started from `checkpoint`, would find nothing new in its sources."""
    offsets = checkpoints.committed_offsets(checkpoint)
    if not offsets:
        return False
    # The checkpoint first (files), the session and the plan after (py4j): a Kafka or file
    # source stops here.
    next_versions = [v for v in map(_next_version, offsets) if v is not None]
    if len(next_versions) < len(offsets):
        return False
    tables = _delta_tables(query)
    if tables is None or len(tables) != len(offsets):
        return False
    ids = [delta_log.table_id(path) for path in tables]
    if Counter(ids) != Counter(offset["reservoirId"] for offset in offsets):
        return False
    latest = {table_id: delta_log.latest_version(path) for table_id, path in zip(ids, tables,
                                                                              strict=True)}
    return all(latest[offset["reservoirId"]] < version
               for offset, version in zip(offsets, next_versions, strict=True))


def _next_version(offset: Any) -> int | None:
    """The version a Delta offset reads next, when it stands between two versions."""
    if not isinstance(offset, dict) or not isinstance(offset.get("reservoirId"), str):
        return None
    version, index = offset.get("reservoirVersion"), offset.get("index")
    if offset.get("isStartingVersion") or offset.get("isInitialSnapshot") \
            or index != BEFORE_FIRST_FILE or not isinstance(version, int):
        return None
    return version


def _delta_tables(query: DataFrame) -> list[StoragePath] | None:
    """The Delta tables `query` streams from, one per source; None when a source is anything
    else."""
    leaves = query._jdf.logicalPlan().collectLeaves()
    tables = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if not leaf.isStreaming():
            continue  # a static side (a stream-static join) reads what it reads at each batch
        if leaf.getClass().getSimpleName() != "StreamingRelation":
            return None
        source = leaf.dataSource()
        path = source.options().get("path")
        if source.className() not in DELTA_SOURCES or not path.isDefined():
            return None
        try:
            tables.append(location(path.get()))
        except ObjectStoreError:
            return None
    return tables or None
