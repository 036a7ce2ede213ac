"""A failed flow as the person running the update reads it: one line, what happened, what to do.

Spark reports a failed query with everything it knows: the task or driver call that failed, its
Java causes and stack, and the source offsets the query had committed. The failures a person
answers differently get a class of their own (errors.py) and a line that says what to do:

* the Kafka broker stopped answering (a client timed out or lost its connection):
  SourceUnavailableError, naming the broker. The update stops within the bounds the
  `kafka.*_timeout_ms` settings give it; once the broker is back, the next update goes on from
  the last committed micro-batch.
* records the pipeline had not read are gone from Kafka (retention deleted them, or the topic was
  deleted), with `kafka.fail_on_data_loss: true`: DataLossError, naming each topic partition and
  the offsets lost, from the offsets the query had committed and the broker's log start offsets.
* an expectation with `fail`: its name, dataset and record (expectations.py).
* a row that breaks a table's declared NOT NULL column: Delta's own line, which names the column
  (Spark's first line is then about the py4j call that failed).

Anything else keeps the first line of Spark's message (of the Java exception's, when a py4j
call failed with one PySpark does not translate).
"""

from __future__ import annotations

import json
import re

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from exactly_once.errors import DataLossError, FlowError, SourceUnavailableError
from exactly_once.kafka.admin import log_start_offsets
from exactly_once.local.graph.expectations import error_text, failure_message
from exactly_once.settings.pipeline import KafkaSettings, pipeline_settings

# A Kafka client gave up on the broker: the admin client's or consumer's timeout, a dropped
# connection, or the Spark consumer's own poll timeout ("Cannot fetch record for offset ...").
_UNAVAILABLE = re.compile(
    r"(?:org\.apache\.kafka\.common\.errors\.(?:TimeoutException|DisconnectException|"
    r"NetworkException): |java\.util\.concurrent\.TimeoutException: (?=Cannot fetch record))"
    r"(.*?)(?: SQLSTATE: \w+)?$", re.MULTILINE)
# Every data-loss report of the Kafka source (Spark's KAFKA_DATA_LOSS conditions and its
# driver-side checks) says this; in the conditions, Spark's detail follows "Reason:".
_DATA_LOSS = "not available in Kafka any more"
_REASON = re.compile(r"Reason: (.*?)(?: SQLSTATE: \w+)?$", re.MULTILINE)
# The failed query's description: `Current Committed Offsets: {KafkaV2[Subscribe[a, b]]: {json}}`,
# the JSON mapping topic -> partition -> the next offset to read.
_COMMITTED = re.compile(r"^Current Committed Offsets: \{.*?\]\]: (\{.*\})\}$", re.MULTILINE)
DATA_LOSS_ACK = "--set kafka.fail_on_data_loss=false"
# Delta refused a row that breaks a table's constraint (a declared NOT NULL column).
_CONSTRAINT = re.compile(r"(\[DELTA_NOT_NULL_CONSTRAINT_VIOLATED\] .*?)(?: SQLSTATE: \w+)?$",
                         re.MULTILINE)


def flow_failure(flow: str, err: BaseException,
                 batch_error: BaseException | None = None) -> FlowError:
    """The one-line error for `flow`, failed with `err`; `batch_error` is what its foreachBatch
    function raised, if that is what failed (Spark's own error then quotes its Python
    traceback, so the first line to show is this one's)."""
    text = error_text(err) + ("\n" + error_text(batch_error) if batch_error else "")
    failed = f"flow `{flow}` failed: "
    expectation = failure_message(err) or (failure_message(batch_error) if batch_error else None)
    if expectation:
        return FlowError(failed + expectation)
    if _DATA_LOSS in text:
        return DataLossError(failed + _data_loss(text, _kafka_settings()))
    cause = _UNAVAILABLE.search(text)
    if cause:
        return SourceUnavailableError(failed + _unavailable(cause.group(1), _kafka_settings()))
    constraint = _CONSTRAINT.search(text)
    if constraint:
        return FlowError(failed + constraint.group(1))
    shown = batch_error or err
    return FlowError(failed + (_message(shown).splitlines() or [type(shown).__name__])[0])


def _message(err: BaseException) -> str:
    """What `err` says; for a JVM exception PySpark left untranslated, the exception's own
    text, not py4j's line about the call ("An error occurred while calling o7960.save.")."""
    if isinstance(err, Py4JJavaError):
        try:
            return str(err.java_exception.toString())
        except Exception:  # noqa: BLE001 - a JVM that is gone: py4j's own text then
            pass
    return str(err)


def _kafka_settings() -> KafkaSettings | None:
    """The Kafka settings of the update that failed: run_pipeline put them in the session's conf
    (as the bundle does on Databricks). None if they cannot be read: naming the broker helps, but
    must never hide the failure being explained."""
    try:
        return pipeline_settings(SparkSession.active()).kafka
    except Exception:  # noqa: BLE001 - no session, no settings: the line goes without them
        return None


def _broker(kafka: KafkaSettings | None) -> str:
    return f"Kafka at {kafka.bootstrap_servers}" if kafka else "Kafka"


def _unavailable(cause: str, kafka: KafkaSettings | None) -> str:
    return (f"{_broker(kafka)} stopped answering ({cause}); once it runs again (the local one: "
            "`exactly-once broker status`), run the update again: it goes on from the last "
            "committed micro-batch")


def _data_loss(text: str, kafka: KafkaSettings | None) -> str:
    lost = _lost_offsets(text, kafka)
    if lost:
        what = "; ".join(
            f"{topic} " + ", ".join(f"partition {p} {_offsets(first, last)}"
                                    for (t, p), (first, last) in sorted(lost.items())
                                    if t == topic)
            for topic in sorted({t for t, _ in lost}))
    else:  # the broker could not say: Spark's own account of the first partition it missed
        reason = _REASON.search(text)
        what = reason.group(1) if reason else "some records"
    return (f"{_broker(kafka)} no longer has records the pipeline had not read (deleted by "
            f"retention, or with their topic): {what}; they are lost. To go on without them, "
            f"run one update with `{DATA_LOSS_ACK}`")


def _offsets(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}-{last}"


def _lost_offsets(text: str, kafka: KafkaSettings | None) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> the first and last offset lost: from where the query had read to
    before the first offset the partition still holds. Empty when that cannot be known."""
    committed = _COMMITTED.search(text)
    if not committed or kafka is None:
        return {}
    try:
        positions = {(topic, int(partition)): offset
                     for topic, partitions in json.loads(committed.group(1)).items()
                     for partition, offset in partitions.items()}
        starts = log_start_offsets(kafka.bootstrap_servers, list(positions))
    except Exception:  # noqa: BLE001 - an unreadable description or broker: Spark's account
        return {}
    return {where: (positions[where], start - 1)
            for where, start in starts.items() if start > positions[where]}
