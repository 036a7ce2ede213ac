"""What Spark did for a test, read from Spark itself: its status store (the rows stages wrote
to shuffles, the plans of SQL executions), a DataFrame's plan (what it scans, whether it needs
a Python worker), the py4j calls a block sends to the JVM, a Delta table's latest commit, and how
the JVM compiles."""

from __future__ import annotations

import threading
from contextlib import contextmanager

from pyspark.sql import SparkSession

from exactly_once.local.observe.timeline import last_job_id
from exactly_once.local.storage import delta_log


def last_operation(path) -> str:
    """The operation of the Delta table's latest commit (WRITE, MERGE, OPTIMIZE...)."""
    return delta_log.commit_info(path, delta_log.latest_version(path))["operation"]


def vm_option(spark: SparkSession, name: str) -> str:
    """The JVM's option `name`, as HotSpot reports it: `TieredStopAtLevel` "4" compiles with C2,
    "1" with C1 alone (engine/jvm_options.py); `ReservedCodeCacheSize` in bytes."""
    jvm = spark._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    return bean.getVMOption(name).getValue()


@contextmanager
def calls_into_the_jvm(spark: SparkSession):
    """The py4j commands the block sends to the session's JVM, in a list filled as it runs:
    those of the thread that opened it. py4j's own thread, telling the JVM of Python objects
    released, sends through the same client at moments of its own."""
    client = spark.sparkContext._gateway._gateway_client
    calls: list[str] = []
    send = client.send_command
    block_thread = threading.get_ident()

    def counted(command, *args, **kwargs):
        if threading.get_ident() == block_thread:
            calls.append(command)
        return send(command, *args, **kwargs)

    client.send_command = counted
    try:
        yield calls
    finally:
        client.send_command = send


class CallsByStep:
    """An AUTO CDC batch's step recorder (`BatchWrite.step`) counting the py4j calls each named
    step sends to the JVM (`calls_into_the_jvm`): `calls[step]`."""

    def __init__(self, spark: SparkSession):
        self.spark, self.calls = spark, {}

    @contextmanager
    def __call__(self, name: str):
        with calls_into_the_jvm(self.spark) as calls:
            yield
        self.calls[name] = self.calls.get(name, 0) + len(calls)


def plan_calls_of_a_wide_batch(spark: SparkSession, scd, spec, schema: str, row: tuple,
                               folder) -> dict[str, int]:
    """One batch of `row` and 20 more string columns applied by SCD module `scd` (scd1, scd2)
    to new tables under `folder`: the py4j calls of each of its steps (`CallsByStep`)."""
    from exactly_once.local.auto_cdc.commits import BatchWrite
    from exactly_once.local.storage.warehouse import AutoCdcTables

    wide = ", ".join(f"c{i} STRING" for i in range(20))
    batch = spark.createDataFrame([(*row, *["x"] * 20)], f"{schema}, {wide}")
    tables = AutoCdcTables(*(str(folder / name) for name in ("target", "state", "rejected")))
    spark.createDataFrame([], scd.target_schema(spec, batch)).write.format("delta") \
        .save(tables.target)
    scd.ensure_state_table(spark, spec, batch, tables.state)
    steps = CallsByStep(spark)
    scd.apply_batch(spark, batch, spec, tables, BatchWrite("test-query", 0, replayed=False,
                                                           step=steps))
    assert delta_log.row_count(tables.target) == 1
    return steps.calls


def _events_delivered(spark: SparkSession):
    """The session's JVM SparkContext once its listener bus has delivered every event so far:
    Spark's status stores learn of jobs and executions asynchronously, and under load they
    lagged behind the command that had just run (a plan list found empty)."""
    context = spark._jsparkSession.sparkContext()
    context.listenerBus().waitUntilEmpty()
    return context


def _stages(spark: SparkSession) -> list:
    """Spark's records of the application's stages (its status store), all events delivered."""
    no_quantiles = spark.sparkContext._gateway.new_array(spark._jvm.double, 0)
    stages = _events_delivered(spark).statusStore().stageList(None, False, False,
                                                               no_quantiles, None)
    return [stages.apply(i) for i in range(stages.size())]


def shuffled_rows_in_stages_after(spark: SparkSession, stage_id: int) -> int:
    """The rows the stages after `stage_id` wrote to shuffles."""
    return sum(int(s.shuffleWriteRecords()) for s in _stages(spark) if s.stageId() > stage_id)


def last_stage_id(spark: SparkSession) -> int:
    return max((int(s.stageId()) for s in _stages(spark)), default=-1)


class ShuffledRowsByStep:
    """A `BatchWrite.step` recorder: the rows each named step of a batch wrote to shuffles."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark, self.rows = spark, {}

    @contextmanager
    def step(self, name: str):
        first = last_stage_id(self.spark)
        yield
        self.rows[name] = self.rows.get(name, 0) + shuffled_rows_in_stages_after(self.spark, first)


def _status_store(spark):
    """Spark's SQL status store, all events delivered (`_events_delivered`)."""
    _events_delivered(spark)
    return spark._jsparkSession.sharedState().statusStore()


def sql_plans_since(spark, execution_id: int) -> list[str]:
    """The physical plans of the session's SQL executions after `execution_id` (the newest
    100), from Spark's own status store."""
    store = _status_store(spark)
    count = store.executionsCount()
    recent = store.executionsList(max(0, count - 100), 100)
    plans = []
    for i in range(recent.size()):
        execution = recent.apply(i)
        if execution.executionId() > execution_id:
            plans.append(execution.physicalPlanDescription())
    return plans


def last_execution_id(spark) -> int:
    store = _status_store(spark)
    count = store.executionsCount()
    return store.executionsList(count - 1, 1).apply(0).executionId() if count else -1


def scan_of(df) -> str:
    """What the read's scan lists: plain paths (Spark's InMemoryFileIndex), Delta's log (its
    own file indexes, PreparedDeltaFileIndex once planned), or nothing (a local relation)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    if "InMemoryFileIndex" in plan:
        return "paths"
    return "delta" if "DeltaFileIndex" in plan or "TahoeLogFileIndex" in plan else "none"


def runs_python_worker(df) -> bool:
    """Whether computing `df` goes through PySpark's Python worker (a `PythonRDD` in its
    lineage, as a DataFrame of a Python list has): a process each new JVM starts for it."""
    return "PythonRDD" in df._jdf.queryExecution().toRdd().toDebugString()


def last_job_id_delivered(spark: SparkSession) -> int:
    """The newest job's id once the status store has every event so far."""
    _events_delivered(spark)
    return last_job_id(spark)


class JobsByStep:
    """A `BatchWrite.step` recorder: the Spark jobs each named step of a batch ran (the jobs of
    the session's other threads too: a test runs nothing beside the batch)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark, self.jobs = spark, {}

    @contextmanager
    def step(self, name: str):
        first = last_job_id_delivered(self.spark)
        yield
        self.jobs[name] = self.jobs.get(name, 0) + last_job_id_delivered(self.spark) - first
