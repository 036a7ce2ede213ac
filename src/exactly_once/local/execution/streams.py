"""The streaming queries of an update: `trigger(availableNow=True)` with a `foreachBatch` writer.

Every streaming flow writes through `foreachBatch`, not Spark's Delta sink: the sink asks Delta
whether a batch already committed (`txnVersion`), which rebuilds the target table's state, two
Spark jobs per micro-batch. Here each write carries a `delta_log.Marker` instead, and only the
one batch that can have committed before, the batch a restarted query replays, is looked up in
the log (`checkpoints.replayed_batch`). Structured Streaming logs a batch's offsets before it
runs and its commit after, so that batch is the last one with offsets and no commit. A batch's
expressions run interpreted, as the update's, or as generated code when it is large
(engine/update_settings.py). A query whose sources have nothing it has not read is not
started (unread.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from exactly_once.errors import FlowError
from exactly_once.local.engine.update_settings import batch_expressions
from exactly_once.local.execution import unread
from exactly_once.local.execution.checkpoints import query_id, replayed_batch
from exactly_once.local.execution.failures import flow_failure
from exactly_once.local.observe.progress import FlowResult, Progress
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage.files import StoragePath

# (micro-batch, its id, the query's id, whether this batch is a replay) -> None
BatchHandler = Callable[[DataFrame, int, str, bool], None]
POLL_SECONDS = 0.2


def flow_error(flow: str, err: BaseException,
               batch_error: BaseException | None = None) -> FlowError:
    """One line saying what stopped the flow and what to do (failures.py)."""
    return flow_failure(flow, err, batch_error)


def run_available_now(df: DataFrame, name: str, checkpoint: StoragePath, handle: BatchHandler,
                      result: FlowResult, progress: Progress, timeline: Timeline) -> None:
    """Process what `df` has now, batch by batch through `handle`, then stop; or, when its
    sources have nothing it has not read (unread.py), start nothing: the flow is SKIPPED."""
    if unread.nothing_unread(df, checkpoint):
        result.status = "SKIPPED"
        return
    replayed = replayed_batch(checkpoint)
    failed: list[BaseException] = []  # what the batch function raised, as Python raised it

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        try:
            with batch_expressions(batch) as generated, timeline.span(
                    name, "foreachBatch", batch_id, "generated code" if generated else ""):
                # The metadata file is written when the query starts, before its first batch.
                handle(batch, batch_id, query_id(checkpoint), batch_id == replayed)
        except BaseException as err:
            failed.append(err)
            raise

    with timeline.span(name, "query start"):
        query = (df.writeStream.queryName(name).foreachBatch(each_batch)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
    with timeline.span(name, "query run"):
        _await(query, result, progress, timeline, failed)


def _await(query: StreamingQuery, result: FlowResult, progress: Progress,
           timeline: Timeline, batch_errors: list[BaseException]) -> None:
    """Wait for an availableNow query, reporting each micro-batch as it completes."""
    seen = -1

    def report() -> None:
        nonlocal seen
        for p in query.recentProgress:
            p = json.loads(p.json)
            if p["batchId"] > seen:
                seen = p["batchId"]
                result.add_streaming_progress(p)
                timeline.add_progress(result.flow, p)
                if p.get("numInputRows"):
                    progress.batch(result.flow, p["batchId"], p["numInputRows"])

    try:
        # pyspark takes seconds as int or float (it waits int(timeout * 1000) ms); its stub
        # declares int only.
        while not query.awaitTermination(POLL_SECONDS):  # type: ignore[arg-type]
            report()
    except Exception as err:  # StreamingQueryException: keep the cause, name the flow
        # A failed batch function's error comes with its Python traceback in Spark's message;
        # the error it raised says what happened.
        batch_error = batch_errors[0] if batch_errors else None
        raise flow_error(result.flow, err, batch_error) from batch_error or err
    report()
