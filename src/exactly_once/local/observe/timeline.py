"""Where an update's seconds go: one span per phase of each flow, and of the update's own work.

A span is a phase on the update's clock (seconds since it started): waiting for an upstream
table, starting a streaming query, a micro-batch and the steps Structured Streaming reports for
it (`durationMs`: latestOffset, getBatch, queryPlanning, addBatch, walCommit, commitOffsets),
the state store's commit, each Delta commit, and AUTO CDC's own steps. Flows record them as they
run (`Timeline.span`), micro-batch steps come from the query's progress (`add_progress`).

With `spark_jobs=True` (`exactly-once run --profile`, the benchmarks) every Spark job of the
update is read from Spark's status store at the end and counted into the innermost span of its
flow that was open when it was submitted, with the CPU its tasks spent (run and deserialization).
Each span recorded in Python also measures the CPU of the JVM thread doing its work: PySpark
pins each Python thread to a JVM thread of its own, and a micro-batch's `foreachBatch` runs on
its streaming query's thread, so the driver's planning, MERGE commands and Delta commits of a
span are counted in it. That costs a few milliseconds per job and span, so plain runs skip it.

The spans go to the event log (`flow_timeline` rows, see event_log.py), to a Chrome / Perfetto
trace (`chrome_trace`: open it in https://ui.perfetto.dev or chrome://tracing) and to the top
costs `run --profile` prints (`top_costs`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

# A flow idle until the tables it reads are up to date (update.py): not a cost of its own.
WAIT_FOR_UPSTREAM = "wait for upstream"

# Structured Streaming's per-batch steps (StreamingQueryProgress.durationMs), in the order a
# micro-batch runs them.
STREAMING_STEPS = ("latestOffset", "walCommit", "getBatch", "queryPlanning", "addBatch",
                   "commitOffsets")
UPDATE = ""  # the flow name of the update's own spans (loading, registering, the event log)


@dataclass(frozen=True)
class Span:
    flow: str  # UPDATE for the update's own work
    phase: str
    start: float  # seconds since the update started
    seconds: float
    batch: int | None = None
    detail: str = ""
    thread: str = ""
    spark_jobs: int | None = None  # None: not counted (no --profile)
    spark_tasks: int | None = None
    spark_job_seconds: float | None = None
    spark_job_names: tuple[str, ...] = ()  # what each job was (Delta's description, call site)
    driver_cpu_seconds: float | None = None  # the JVM thread that did the span's work
    task_cpu_seconds: float | None = None  # the tasks of its Spark jobs

    @property
    def end(self) -> float:
        return self.start + self.seconds


@dataclass
class _Job:
    submitted: float  # update clock
    seconds: float
    tasks: int
    description: str
    name: str  # the call site that submitted it
    task_cpu_seconds: float = 0.0

    def label(self) -> str:
        """What the job did, in a few words: Delta names its own jobs in the description's
        first line after the query's name; other jobs are known by their call site."""
        lines = self.description.split("\n")
        first = lines[0].removeprefix("Delta: ").strip()
        return first if first and " = " not in first and len(lines) == 1 else self.name


@dataclass
class Timeline:
    """Spans of one update. Thread-safe: flows record from their own threads."""

    spark_jobs: bool = False
    origin: float = field(default_factory=time.monotonic)
    wall_origin: float = field(default_factory=time.time)
    spans: list[Span] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _first_job: int | None = None
    _threads: Any = None  # the JVM's ThreadMXBean, when profiling

    def now(self) -> float:
        return time.monotonic() - self.origin

    def add(self, span: Span) -> None:
        with self._lock:
            self.spans.append(span)

    @contextmanager
    def span(self, flow: str, phase: str, batch: int | None = None,
             detail: str = "") -> Iterator[None]:
        start, cpu = self.now(), self._thread_cpu()
        try:
            yield
        finally:
            driver_cpu = None if cpu is None else (self._thread_cpu() or cpu) - cpu
            self.add(Span(flow, phase, start, self.now() - start, batch, detail,
                          threading.current_thread().name, driver_cpu_seconds=driver_cpu))

    def _thread_cpu(self) -> float | None:
        """CPU seconds of the JVM thread serving this Python thread (profiling only)."""
        return None if self._threads is None else \
            self._threads.getCurrentThreadCpuTime() / 1e9

    def add_progress(self, flow: str, progress: dict[str, Any]) -> None:
        """A micro-batch from its StreamingQueryProgress: the batch, then its steps in order,
        and the state store's commit when the query has stateful operators."""
        started = self._from_wall(progress["timestamp"])
        steps = progress.get("durationMs") or {}
        batch = int(progress["batchId"])
        total = steps.get("triggerExecution", 0) / 1000
        self.add(Span(flow, "micro-batch", started, total, batch,
                      f"{progress.get('numInputRows', 0)} rows in", "stream"))
        at = started
        for step in STREAMING_STEPS:
            if steps.get(step):
                self.add(Span(flow, step, at, steps[step] / 1000, batch, thread="stream"))
                at += steps[step] / 1000
        commit = sum(op.get("commitTimeMs", 0) for op in progress.get("stateOperators") or [])
        if commit:  # within addBatch, at its end
            self.add(Span(flow, "state store commit", at - commit / 1000, commit / 1000, batch,
                          thread="stream"))

    def _from_wall(self, timestamp: str) -> float:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
        return moment - self.wall_origin

    # -- Spark jobs ----------------------------------------------------------------------------
    def mark_first_job(self, spark: Any) -> None:
        """Remember where this update's Spark jobs start (only when counting them)."""
        if self.spark_jobs:
            self._first_job = last_job_id(spark) + 1
            self._threads = spark.sparkContext._jvm.java.lang.management.ManagementFactory \
                .getThreadMXBean()

    def count_spark_jobs(self, spark: Any) -> None:
        """Count each job of this update into the innermost open span of its flow (by the
        streaming query name its description starts with), else into the update's own."""
        if not self.spark_jobs or self._first_job is None:
            return
        jobs = _jobs_since(spark, self._first_job, self.wall_origin)
        flows = {s.flow for s in self.spans}
        counts: dict[int, list[_Job]] = defaultdict(list)
        with self._lock:
            for job in jobs:
                owner = _flow_of(job.description, flows)
                index = _innermost(self.spans, owner, job.submitted)
                if index is None and owner != UPDATE:
                    index = _innermost(self.spans, UPDATE, job.submitted)
                if index is not None:
                    counts[index].append(job)
            for index, span in enumerate(self.spans):
                mine = counts.get(index, [])
                self.spans[index] = replace(
                    span, spark_jobs=len(mine), spark_tasks=sum(j.tasks for j in mine),
                    spark_job_seconds=round(float(sum(j.seconds for j in mine)), 3),
                    spark_job_names=tuple(j.label() for j in mine),
                    task_cpu_seconds=round(sum(j.task_cpu_seconds for j in mine), 4))
        self._threads = None  # the update is over: later spans are not measured

    # -- views ---------------------------------------------------------------------------------
    def of_flow(self, flow: str) -> list[Span]:
        return sorted((s for s in self.spans if s.flow == flow), key=lambda s: s.start)

    def self_seconds(self, measure: str = "seconds") -> list[float]:
        """Each span's own time (or `measure`: driver_cpu_seconds): its seconds less those of the
        spans directly inside it (of its flow), so that summing them counts every second once."""
        own = [getattr(s, measure) or 0.0 for s in self.spans]
        by_flow: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(self.spans):
            by_flow[s.flow].append(i)
        for indices in by_flow.values():
            indices.sort(key=lambda i: (self.spans[i].start, -self.spans[i].seconds))
            for position, i in enumerate(indices):
                parent = self.spans[i]
                inner_end = parent.start
                for j in indices[position + 1:]:
                    child = self.spans[j]
                    if child.start > parent.end - EPSILON:
                        break
                    # A direct child starts after the previous direct child ended.
                    if child.start >= inner_end - EPSILON and child.end <= parent.end + EPSILON:
                        own[i] -= getattr(child, measure) or 0.0
                        inner_end = child.end
        return [max(seconds, 0.0) for seconds in own]

    def top_costs(self, limit: int = 12) -> list[Cost]:
        """Own seconds, spans, Spark jobs and CPU summed per flow and phase, costliest first:
        where the update's seconds went, each counted once."""
        totals: dict[tuple[str, str], Cost] = {}
        driver_cpu = self.self_seconds("driver_cpu_seconds")
        for s, own, cpu in zip(self.spans, self.self_seconds(), driver_cpu, strict=True):
            if s.phase == WAIT_FOR_UPSTREAM:  # idle: the upstream's own spans count that time
                continue
            cost = totals.setdefault((s.flow, s.phase), Cost(s.flow, s.phase))
            cost.seconds += own
            cost.spans += 1
            if s.spark_jobs is not None:
                cost.spark_jobs = (cost.spark_jobs or 0) + s.spark_jobs
            if s.driver_cpu_seconds is not None:
                cost.driver_cpu_seconds = (cost.driver_cpu_seconds or 0.0) + max(cpu, 0.0)
            if s.task_cpu_seconds is not None:
                cost.task_cpu_seconds = (cost.task_cpu_seconds or 0.0) + s.task_cpu_seconds
        return sorted(totals.values(), key=lambda c: -c.seconds)[:limit]

    def chrome_trace(self) -> dict[str, Any]:
        """The spans as Chrome trace events (one track per flow), for Perfetto or
        chrome://tracing."""
        tracks = {flow: i for i, flow in enumerate(
            sorted({s.flow for s in self.spans}, key=lambda f: (f != UPDATE, f)))}
        events: list[dict[str, Any]] = [
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": tid,
             "args": {"name": flow or "update"}} for flow, tid in tracks.items()]
        for s in sorted(self.spans, key=lambda s: (s.start, -s.seconds)):
            args: dict[str, Any] = {"detail": s.detail} if s.detail else {}
            if s.batch is not None:
                args["batch"] = s.batch
            if s.spark_jobs is not None:
                args.update(spark_jobs=s.spark_jobs, spark_tasks=s.spark_tasks,
                            spark_job_seconds=s.spark_job_seconds)
            if s.spark_job_names:
                args["spark_job_names"] = list(s.spark_job_names)
            if s.driver_cpu_seconds is not None:
                args["driver_cpu_seconds"] = round(s.driver_cpu_seconds, 4)
            if s.task_cpu_seconds is not None:
                args["task_cpu_seconds"] = s.task_cpu_seconds
            events.append({"ph": "X", "name": s.phase, "cat": s.flow or "update", "pid": 1,
                           "tid": tracks[s.flow], "ts": round(s.start * 1e6),
                           "dur": max(round(s.seconds * 1e6), 1), "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def write_chrome_trace(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.chrome_trace()), encoding="utf-8")
        return path


@dataclass
class Cost:
    """One flow's phase, summed over its spans (`Timeline.top_costs`). CPU is None where it was
    not measured (no --profile, or a phase read from a query's progress)."""

    flow: str
    phase: str
    seconds: float = 0.0  # own wall seconds
    spans: int = 0
    spark_jobs: int | None = None
    driver_cpu_seconds: float | None = None
    task_cpu_seconds: float | None = None

    def as_row(self) -> list[Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 3)
        return [self.flow, self.phase, round(self.seconds, 3), self.spans, self.spark_jobs,
                rounded(self.driver_cpu_seconds), rounded(self.task_cpu_seconds)]


# Seconds of slack when nesting spans: micro-batch steps are placed by the wall clock of their
# progress report, the other spans by the monotonic clock.
EPSILON = 0.005


def _innermost(spans: list[Span], flow: str, at: float) -> int | None:
    best, best_length = None, float("inf")
    for i, s in enumerate(spans):
        if s.flow == flow and s.start <= at <= s.end and s.seconds < best_length:
            best, best_length = i, s.seconds
    return best


def _flow_of(description: str, flows: set[str]) -> str:
    """A streaming query's jobs are described `<query name>\\nid = ...` (Delta prefixes its own
    with `Delta: `); the runtime names each query after its flow. A flow described by its name
    alone (a view, a snapshot flow: flows.jobs_described) has Delta's own jobs described
    `Delta: <flow>: <what it does>`."""
    first = description.split("\n", 1)[0].strip()
    while first.startswith("Delta: "):
        first = first.removeprefix("Delta: ").strip()
    named = first.split(": ", 1)[0]
    return first if first in flows else named if named in flows else UPDATE


def _status_jobs(spark: Any) -> Iterator[Any]:
    """The status store's jobs (v1.JobData), newest first."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None).iterator()
    while jobs.hasNext():
        yield jobs.next()


def last_job_id(spark: Any) -> int:
    """The newest job's id in the status store (-1 before any job): what it knows so far, as
    its listener delivers Spark's events a moment after they happen."""
    return next((job.jobId() for job in _status_jobs(spark)), -1)


def _jobs_since(spark: Any, first: int, wall_origin: float) -> list[_Job]:
    """Jobs with id >= `first`, from the status store (what the Spark UI shows)."""
    found = []
    store = spark.sparkContext._jsc.sc().statusStore()
    for job in _status_jobs(spark):
        if job.jobId() < first:
            break
        if not job.submissionTime().isDefined():
            continue
        submitted = job.submissionTime().get().getTime() / 1000
        done = job.completionTime().get().getTime() / 1000 \
            if job.completionTime().isDefined() else submitted
        description = job.description().get() if job.description().isDefined() else ""
        found.append(_Job(submitted - wall_origin, done - submitted, job.numTasks(),
                          description, str(job.name()), _task_cpu(store, job)))
    return found


def _task_cpu(store: Any, job: Any) -> float:
    """CPU seconds the tasks of `job`'s stages spent running and deserializing."""
    nanos = 0
    stages = job.stageIds().iterator()
    while stages.hasNext():
        try:
            stage = store.lastStageAttempt(stages.next())
        except Exception:  # noqa: BLE001 - a skipped stage has no attempt
            continue
        nanos += stage.executorCpuTime() + stage.executorDeserializeCpuTime()
    return nanos / 1e9
