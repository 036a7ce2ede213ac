"""`dp.append_flow`, `dp.create_sink` and `dp.foreach_batch_sink` with Databricks' signatures, for
local runs, and what a flow's query must be (into a sink; a stream written in append mode).

pyspark 4.2's `append_flow` lacks `once` and `comment`, and its `create_sink` checks nothing;
pipeline files are written against Databricks, so locally these stand in for them
(`dp_extensions.installed`). They register pyspark's own types: a `DeclaredFlow` is a pyspark
`Flow` that also carries `once` and `comment`, a sink is pyspark's `Sink` output.

References: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-append-flow (a
`once` flow's query is a batch DataFrame; it runs once, and again when a full refresh recreates
its target: https://docs.databricks.com/aws/en/ldp/flows-backfill) and
https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-sink (`delta` by `path` or a
fully qualified `tableName`, `kafka` by `kafka.bootstrap.servers` and `topic`; append flows only;
no expectations) and
https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-foreach-batch-sink (a function
called with each micro-batch of the streaming append flows into it, and the batch's id;
https://docs.databricks.com/aws/en/ldp/for-each-batch). A documented argument the runtime does
not implement, and a sink option it cannot honour, is a `DeclarationError` about the target,
raised while the file runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.pipelines.flow import Flow, QueryFunction
from pyspark.pipelines.output import Sink
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from exactly_once.errors import DeclarationError, FlowError, first_line
from exactly_once.kafka.sink_transactions import RUNTIME_SETTINGS, refused_setting
from exactly_once.local.graph import source_locations

DELTA, KAFKA = "delta", "kafka"
FOREACH_BATCH = "foreachBatch"  # a `dp.foreach_batch_sink`'s format
# The Delta writer options a sink's writes carry for their exactly-once markers
# (storage/idempotent.py), or that only a streaming query takes.
RUNTIME_DELTA_OPTIONS = ("userMetadata", "txnAppId", "txnVersion", "checkpointLocation")
KAFKA_PREFIX = "kafka."
HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))
# Spark checks a stream against its sink's output mode when it starts, unless this is false.
UNSUPPORTED_OPERATION_CHECK = "spark.sql.streaming.unsupportedOperationCheck"


@dataclass(frozen=True)
class DeclaredFlow(Flow):
    """An append flow as Databricks declares it: pyspark's Flow, plus whether it runs once
    (a backfill) and its description."""

    once: bool = False
    comment: str | None = None


@dataclass(frozen=True)
class ForEachBatchSink(Sink):
    """A `@dp.foreach_batch_sink`: pyspark's Sink, plus the function each micro-batch of its
    flows is given to, with the batch's id."""

    handler: Callable[[DataFrame, int], object]


def is_once(flow: object) -> bool:
    """Whether `flow` (of any kind: append, AUTO CDC, snapshot) runs once."""
    return bool(getattr(flow, "once", False))


@dataclass(frozen=True)
class FlowDeclarations:
    """Databricks' `dp.append_flow` and `dp.create_sink`, bound to the graph the files fill."""

    register_flow: Callable[[Flow], None]
    register_sink: Callable[[Sink], None]

    def append_flow(self, *, target: str, name: str | None = None, once: bool = False,
                    spark_conf: Mapping[str, str] | None = None, comment: str | None = None,
                    depends_on: Any = None, import_checkpoint: str | None = None
                    ) -> Callable[[QueryFunction], None]:
        def error(message: str) -> DeclarationError:
            return DeclarationError(f"append_flow: {message}", dataset=target)

        for argument, value in (("depends_on", depends_on),
                                ("import_checkpoint", import_checkpoint)):
            if value is not None:
                raise error(f"{argument} is not supported by the local runtime")
        if name is not None and not isinstance(name, str):
            raise error(f"name must be a string, got {name!r}")
        if spark_conf is not None and not isinstance(spark_conf, Mapping):
            raise error(f"spark_conf must be a dict of Spark settings, got {spark_conf!r}")
        if comment is not None and not isinstance(comment, str):
            raise error(f"comment must be a string, got {comment!r}")
        location = source_locations.caller(stacklevel=1)
        conf = {str(key): str(value) for key, value in (spark_conf or {}).items()}

        def outer(func: QueryFunction) -> None:
            self.register_flow(DeclaredFlow(
                name=name if name is not None else func.__name__, target=target,
                spark_conf=conf, source_code_location=location, func=func, once=bool(once),
                comment=comment))

        return outer

    @staticmethod
    def replace_flow(*, target: str, **_: Any) -> Callable[[QueryFunction], None]:
        """Databricks' `@dp.replace_flow` (Beta): refused, by name."""
        raise DeclarationError("replace_flow (Beta: a replace flow) is not supported by the "
                               "local runtime", dataset=target)

    @staticmethod
    def update_flow(*, target: str, **_: Any) -> Callable[[QueryFunction], None]:
        """Databricks' `@dp.update_flow` (Beta): refused, by name."""
        raise DeclarationError("update_flow (Beta: an update flow) is not supported by the "
                               "local runtime", dataset=target)

    def foreach_batch_sink(self, handler: Callable[[DataFrame, int], object] | None = None, *,
                           name: str | None = None) -> Any:
        """`@dp.foreach_batch_sink(name=...)` (or bare): the sink named `name`, else by the
        function; the function is returned as it was."""
        location = source_locations.caller(stacklevel=1)

        def register(func: Callable[[DataFrame, int], object]) -> Callable[[DataFrame, int],
                                                                            object]:
            sink = name if name is not None else getattr(func, "__name__", None)
            if not isinstance(sink, str) or not sink:
                raise DeclarationError(f"foreach_batch_sink: name must be a string, got {sink!r}")
            try:
                inspect.signature(func).bind(None, 0)
            except (TypeError, ValueError):
                raise DeclarationError(f"foreach_batch_sink: `{sink}` must be a function of "
                                       "(df, batch_id)", dataset=sink) from None
            self.register_sink(ForEachBatchSink(
                name=sink, comment=None, format=FOREACH_BATCH, options={},
                source_code_location=location, handler=func))
            return func

        return register if handler is None else register(handler)

    def create_sink(self, name: str, format: str, options: Mapping[str, str] | None = None
                    ) -> None:
        def error(message: str) -> DeclarationError:
            return DeclarationError(f"create_sink: {message}", dataset=str(name))

        if not isinstance(name, str) or not name:
            raise error(f"name must be a string, got {name!r}")
        if options is not None and not isinstance(options, Mapping):
            raise error(f"options must be a dict of strings, got {options!r}")
        given = {str(key): str(value) for key, value in (options or {}).items()}
        if format == DELTA:
            _check_delta_options(given, error)
        elif format == KAFKA:
            _check_kafka_options(given, error)
        else:
            raise error(f"format must be 'delta' or 'kafka', got {format!r}")
        self.register_sink(Sink(name=name, comment=None, format=format, options=given,
                                source_code_location=source_locations.caller(stacklevel=1)))


def _check_delta_options(options: dict[str, str],
                         error: Callable[[str], DeclarationError]) -> None:
    places = [key for key in ("path", "tableName") if key in options]
    if not places:
        raise error("a delta sink takes option `path` or `tableName`")
    if len(places) > 1:
        raise error("a delta sink takes option `path` or `tableName`, not both")
    table = options.get("tableName")
    if table is not None:
        parts = table.split(".")
        if len(parts) not in (2, 3) or not all(parts):
            raise error("tableName must be fully qualified (<schema>.<table> or "
                        f"<catalog>.<schema>.<table>), got {table!r}")
    for key in options:
        if key in RUNTIME_DELTA_OPTIONS:
            raise error(f"option `{key}` is the runtime's own (the sink's writes are made "
                        "idempotent by it)")


def _check_kafka_options(options: dict[str, str],
                         error: Callable[[str], DeclarationError]) -> None:
    if not options.get("kafka.bootstrap.servers") or not options.get("topic"):
        raise error("a kafka sink needs options `kafka.bootstrap.servers` and `topic`")
    for key in options:
        if key != "topic" and not key.startswith(KAFKA_PREFIX):
            raise error(f"option `{key}` is not an option of a kafka sink (`topic`, `kafka.*`)")
        if key.removeprefix(KAFKA_PREFIX) in RUNTIME_SETTINGS:
            raise error(f"option `{key}` is the runtime's own (the sink sends each batch in one "
                        "Kafka transaction)")
    refused = refused_setting(kafka_client_settings(options))
    if refused is not None:
        setting, reason = refused
        which = f"option `{KAFKA_PREFIX}{setting}` is" if setting else "the `kafka.*` options are"
        raise error(f"{which} not a setting of the local Kafka client (librdkafka): {reason}")


# -- what the runtime reads of a sink ----------------------------------------------------------
def kafka_client_settings(options: Mapping[str, str]) -> dict[str, str]:
    """A kafka sink's `kafka.*` options but the servers, as the client names them."""
    return {key.removeprefix(KAFKA_PREFIX): value for key, value in options.items()
            if key.startswith(KAFKA_PREFIX) and key != "kafka.bootstrap.servers"}


def delta_sink_path(sink: Sink) -> str | None:
    """Where a delta sink by `path` writes, absolute (a relative path from the working
    directory); None for a sink by `tableName`."""
    path = sink.options.get("path")
    if path is None or "://" in path:
        return path
    return str(Path(path).absolute())


def delta_writer_options(sink: Sink) -> dict[str, str]:
    """A delta sink's options for Delta's writer: all but where it writes."""
    return {k: v for k, v in sink.options.items() if k not in ("path", "tableName")}


def check_flow_query(flow: Flow, df: DataFrame, sink: Sink | None) -> None:
    """What a flow's query must be, checked once it is built, before it runs (`dry-run` checks
    the same): a once flow's a batch, a sink flow's a stream (unless once), and the rows of a
    kafka sink's flow what Kafka takes."""
    if is_once(flow) and df.isStreaming:
        raise FlowError(f"flow `{flow.name}` is a once flow (once=True): its query must be a "
                        "batch DataFrame (spark.read), not a stream")
    if sink is None:
        return
    if sink.format == FOREACH_BATCH and is_once(flow):
        raise FlowError(f"flow `{flow.name}` writes to foreach_batch_sink `{sink.name}`, which "
                        "takes the micro-batches of a stream: a once flow's batch query is not "
                        "one (Databricks: for streaming queries, not batch-only pipelines)")
    if not is_once(flow) and not df.isStreaming:
        raise FlowError(f"flow `{flow.name}` writes to sink `{sink.name}` but its query is not a "
                        "stream; read with spark.readStream, or declare it once=True")
    if sink.format == KAFKA:
        check_kafka_rows(sink.name, flow.name, df.schema)


def check_append_query(flow_name: str, target: str, df: DataFrame) -> None:
    """An append flow into a streaming table (no `once`) appends a stream: `run` and `dry-run`
    refuse a batch query in these words, naming the file and the table (SQL's twin: INSERT INTO
    without STREAM)."""
    if not df.isStreaming:
        raise DeclarationError(f"flow `{flow_name}` writes to streaming table `{target}` but its "
                               "query is not a stream; read with spark.readStream, declare it "
                               "once=True, or declare a materialized view", dataset=target)


def check_appended_stream(flow_name: str, target: str, df: DataFrame) -> None:
    """A stream the flow writes in append mode, the only mode of a streaming table, a sink and
    an AUTO CDC flow's micro-batches: what Spark refuses for it when the query starts (an
    aggregation without a watermark, ...; `UnsupportedOperationChecker`), `dry-run` and `run`
    refuse first, in the same line."""
    session = df.sparkSession
    if not df.isStreaming or session.conf.get(UNSUPPORTED_OPERATION_CHECK, "true") == "false":
        return
    jvm: Any = session._jvm
    try:
        jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker.checkForStreaming(
            df._jdf.queryExecution().analyzed(),
            jvm.org.apache.spark.sql.streaming.OutputMode.Append())
    except (AnalysisException, Py4JJavaError) as err:
        raise DeclarationError(f"flow `{flow_name}` writes to `{target}` in append mode, where "
                               f"Spark refuses its stream: {first_line(err)}",
                               dataset=target) from None


def check_kafka_rows(sink: str, flow: str, schema: StructType) -> None:
    """The columns Spark's Kafka writer takes: `value` (string or binary), and optionally `key`
    (the same), `headers` (array<struct<key: string, value: binary>>) and `partition` (int);
    `topic` is the sink's option, other columns are not sent."""
    def error(message: str) -> DeclarationError:
        return DeclarationError(f"kafka sink `{sink}`: {message}", dataset=sink)

    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise error(f"the rows of flow `{flow}` have no `value` column (their columns: "
                    f"{', '.join(types)})")
    expected: dict[str, tuple[str, Callable[[DataType], bool]]] = {
        "value": ("a string or binary", lambda t: isinstance(t, StringType | BinaryType)),
        "key": ("a string or binary", lambda t: isinstance(t, StringType | BinaryType)),
        "headers": (HEADERS_TYPE.simpleString(), _headers_type),
        "partition": ("an int", lambda t: isinstance(t, IntegerType)),
    }
    for column, (wanted, fits) in expected.items():
        if column in types and not fits(types[column]):
            raise error(f"column `{column}` of flow `{flow}` must be {wanted}, got "
                        f"{types[column].simpleString()}")


def _headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return (set(fields) == {"key", "value"} and isinstance(fields["key"], StringType)
            and isinstance(fields["value"], BinaryType))
