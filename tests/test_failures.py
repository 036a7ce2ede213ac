"""How a failed flow is told in one line (local/execution/failures.py), from the text Spark reports.

The texts below are the parts of real Spark 4.2 / Kafka 3.9 failures that the translation reads
(tests/test_broker_faults.py produces the real ones, minutes each); the rest of a real message is
stack frames and the query's plan.
"""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JJavaError

from exactly_once.errors import DataLossError, FlowError, SourceUnavailableError
from exactly_once.local.execution.failures import flow_failure

STREAM_FAILED = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: {} "
                 "SQLSTATE: XXKST\n=== Streaming Query ===\nIdentifier: bronze_kafka_events\n"
                 "Current Committed Offsets: {{KafkaV2[Subscribe[no-such-topic]]: "
                 '{{"no-such-topic":{{"0":5}}}}}}\n')


@pytest.mark.parametrize("cause, said", [
    ("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
     "Call: listNodes", "Timed out waiting for a node assignment. Call: listNodes"),
    ("Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: "
     "Lost task 0.0: java.util.concurrent.TimeoutException: Cannot fetch record for offset 3 in "
     "20000 milliseconds\n\tat org.apache.spark.sql.kafka010.consumer.InternalKafkaConsumer",
     "Cannot fetch record for offset 3 in 20000 milliseconds"),
])
def test_a_broker_that_stopped_answering_is_named_with_what_to_do(cause, said):
    error = flow_failure("bronze_kafka_events", RuntimeError(STREAM_FAILED.format(cause)))
    assert type(error) is SourceUnavailableError
    message = str(error)
    assert message.startswith("flow `bronze_kafka_events` failed: Kafka")
    assert f" stopped answering ({said}); once it runs again" in message
    assert message.endswith("run the update again: it goes on from the last committed "
                            "micro-batch")


def test_data_loss_the_broker_cannot_detail_keeps_sparks_account():
    cause = ("[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data may have been lost because "
             "they are not available in Kafka any more; either the data was aged out by Kafka or "
             "the topic may have been deleted before all the data in the topic was processed. If "
             "you don't want your streaming query to fail on such cases, set the source option "
             "failOnDataLoss to false. Reason: Could not read records in offset [5, 9) for topic "
             "partition no-such-topic-0 with consumer group spark-kafka-source-x-executor.")
    error = flow_failure("bronze_kafka_events", RuntimeError(STREAM_FAILED.format(cause)))
    assert type(error) is DataLossError
    assert ("no longer has records the pipeline had not read (deleted by retention, or with "
            "their topic): Could not read records in offset [5, 9) for topic partition "
            "no-such-topic-0 with consumer group spark-kafka-source-x-executor.; they are lost. "
            "To go on without them, run one update with `--set kafka.fail_on_data_loss=false`"
            ) in str(error)


@pytest.mark.parametrize("text, line", [
    # A timeout that is not Kafka's stays Spark's first line.
    ("java.util.concurrent.TimeoutException: Futures timed out after [300 seconds]\n\tat x",
     "java.util.concurrent.TimeoutException: Futures timed out after [300 seconds]"),
    ("", "RuntimeError"),
])
def test_any_other_failure_keeps_the_first_line_of_sparks_message(text, line):
    error = flow_failure("silver_orders", RuntimeError(text))
    assert type(error) is FlowError
    assert str(error) == f"flow `silver_orders` failed: {line}"


def test_a_java_error_behind_a_python_call_is_told_by_its_java_exception(spark):
    """A foreachBatch function whose py4j call failed in the JVM with an exception PySpark does
    not translate: py4j's first line names only the call ("An error occurred while calling
    o7960.save."), so the line is the Java exception's own."""
    with pytest.raises(Py4JJavaError) as raised:
        spark._jvm.java.lang.Class.forName("no.such.Class")
    stream_failed = RuntimeError(STREAM_FAILED.format(
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function"))
    error = flow_failure("orders_history", stream_failed, raised.value)
    assert str(error) == ("flow `orders_history` failed: java.lang.ClassNotFoundException: "
                          "no.such.Class")
