"""The child processes the Spark driver JVM starts, recorded by Java Flight Recorder.

Each is a fork and an exec of milliseconds, and a small update used to start hundreds
(`local_fs.py`). `ProcessRecording` records JFR's `jdk.ProcessStart` events (JDK 15+) with
their stacks from `start()` to `stop()`, in the running JVM, and returns one `ProcessStart` per
process: the program and who asked for it, the first caller outside the JDK and the helpers
that only run commands (Hadoop's `Shell`, Spark's `deleteRecursively` and its wrappers).

JDK 17 starts the Flight Recorder by rewriting `java.lang.Throwable`, `Error` and its I/O
classes, which throws away every compiled method that inlined them: started by the first
recording in a warm session, the update it records compiles everything again (47 s of
compilation instead of 6, 28 s instead of 12 on the project's machine). A session that will
record while warm (the test suite's, the benchmarks') starts it before its first update with
`start_flight_recorder`. Sessions do not by default: a started recorder also cost every update
of a new process more compilation (+7-9 s of JIT over 7 updates, a first update 1.04-1.20x).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Frames skipped to find who asked for a process: the JDK and the command runners.
_RUNNERS = ("java.", "jdk.", "sun.", "org.apache.hadoop.util.Shell",
            "org.apache.spark.network.util.JavaUtils", "org.apache.spark.util.SparkFileUtils",
            "org.apache.spark.util.Utils")


@dataclass(frozen=True)
class ProcessStart:
    program: str  # the command's first word, without its directory: "rm", "chmod"
    caller: str  # Class.method (class without its package) that started it, "" if unknown


def start_flight_recorder(spark: Any) -> None:
    """The driver JVM's Flight Recorder started, without a recording, so that a later recording
    starts without throwing away what the JIT compiled."""
    spark.sparkContext._jvm.jdk.jfr.FlightRecorder.getFlightRecorder()


class ProcessRecording:
    """A JFR recording of the processes the driver JVM starts, in that JVM."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._recording: Any = None

    def start(self) -> ProcessRecording:
        self._recording = self._jvm.jdk.jfr.Recording()
        self._recording.enable("jdk.ProcessStart").withStackTrace()
        self._recording.start()
        return self

    def stop(self) -> list[ProcessStart]:
        recording, self._recording = self._recording, None
        recording.stop()
        with tempfile.TemporaryDirectory(prefix="jvm-processes-") as tmp:
            path = self._jvm.java.io.File(str(Path(tmp) / "processes.jfr")).toPath()
            recording.dump(path)
            recording.close()
            events = self._jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(path)
            return [_process_start(event) for event in events
                    if event.getEventType().getName() == "jdk.ProcessStart"]


def summary(starts: list[ProcessStart]) -> str:
    """`0`, or `25: rm 25 (RocksDB.close 16, ...)`: a count, then per program by caller."""
    if not starts:
        return "0"
    programs = Counter(s.program for s in starts)
    parts = []
    for program, count in programs.most_common():
        callers = Counter(s.caller for s in starts if s.program == program)
        parts.append(f"{program} {count} (" + ", ".join(
            f"{caller or '?'} {n}" for caller, n in callers.most_common()) + ")")
    return f"{len(starts)}: " + "; ".join(parts)


def _process_start(event: Any) -> ProcessStart:
    program = (event.getString("command") or "").split(" ", 1)[0].rsplit("/", 1)[-1]
    trace = event.getStackTrace()
    for frame in (trace.getFrames() if trace is not None else []):
        kind = frame.getMethod().getType().getName()
        # Scala names a private method `pkg$Class$$method`: the part after `$$` is its name.
        method = frame.getMethod().getName().rsplit("$$", 1)[-1]
        if not kind.startswith(_RUNNERS) and "deleterecursively" not in method.lower():
            return ProcessStart(program, f"{kind.rsplit('.', 1)[-1]}.{method}")
    return ProcessStart(program, "")
