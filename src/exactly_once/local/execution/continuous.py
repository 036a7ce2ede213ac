"""Continuous runs: updates one after another, paced by a processing-time trigger, until stopped.

Databricks runs a continuous pipeline's streaming flows with a processing-time trigger. Locally
every flow runs with `availableNow` (streams.py), so a continuous run here is a loop of ordinary
updates, each over what has arrived since the last, started every `trigger_interval` (at once when
the previous one took longer, as Spark's ProcessingTime trigger does). Why cycles and not a
long-running query per flow: an update is the unit the runtime already makes safe and visible
(dependency order, materialized views recomputed over complete inputs, AUTO CDC commit markers,
one event-log commit with its timeline, the lock), so each cycle is exactly a triggered update,
and the dashboard and the tests see the same rows either way.

Stopping: SIGINT or SIGTERM sets a flag (`StopRequest`); the update in progress runs on to its end,
every micro-batch of it committed (data, checkpoint and event log), then the loop ends and the
command exits 0. Nothing is left half-done: no checkpoint holds an offset without its commit, so
the next run replays nothing. A second signal stops at once (KeyboardInterrupt, exit 130): like a
crash, which the next run recovers from. Signal the Python process, not its process group:
PySpark's JVM ignores SIGINT but dies of SIGTERM, and without it the update in progress fails.
The warehouse's lock is held from the first update to the last.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from pyspark.sql import SparkSession

from exactly_once.errors import SettingsError
from exactly_once.local.execution.pipeline import run_update
from exactly_once.local.observe.progress import Progress, UpdateResult
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage.files import StoragePath
from exactly_once.local.storage.lock import WarehouseLock
from exactly_once.paths import PIPELINES_DIR
from exactly_once.settings.pipeline import Settings

DEFAULT_TRIGGER_INTERVAL = "10 seconds"
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|"
                       r"minutes?|h|hours?)?\s*$")


def parse_interval(text: str) -> float:
    """Seconds of `10s`, `500ms`, `2 minutes`, `1h` or a bare number of seconds, as Spark's
    `trigger(processingTime=...)` reads them; more than zero."""
    match = _INTERVAL.match(text.lower())
    if match is None or float(match.group(1)) <= 0:
        raise SettingsError(f"not a trigger interval: {text!r} (e.g. 10s, 500ms, 1 minute)")
    unit = match.group(2) or "s"
    scale = 0.001 if unit.startswith(("ms", "milli")) else \
        {"s": 1.0, "m": 60.0, "h": 3600.0}[unit[0]]
    return float(match.group(1)) * scale


def _say(text: str) -> None:
    """`text` on stderr from a signal handler: by os.write, not print, as the main thread may be
    inside a write to stderr right now; a stderr with no file descriptor (the resident engine's
    stream to the command's process, cli/engine_server.py) takes writes made in between its own."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        sys.stderr.write(text)
        return
    os.write(fd, text.encode())


class StopRequest:
    """SIGINT / SIGTERM -> a flag the loop checks between updates; a second signal interrupts."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, stopping: str = "stopping after the current update") -> None:
        self.stopping = stopping  # what the first signal prints
        self.event = threading.Event()
        self.signal: str | None = None
        self._previous: dict[int, Any] = {}

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, reason: str = "stop requested") -> None:
        self.signal = self.signal or reason
        self.event.set()

    def wait(self, seconds: float) -> bool:
        return self.event.wait(max(seconds, 0.0))

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():
            raise KeyboardInterrupt  # the second signal: stop now
        self.set(signal.Signals(signum).name)
        _say(f"{self.signal}: {self.stopping} (again to stop at once)\n")

    def install(self) -> None:
        """(Re)install the handlers: PySpark's SparkContext replaces SIGINT's with one that
        cancels every job, so call this again once the session is built."""
        for sig in self.SIGNALS:
            previous = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, previous)

    def __enter__(self) -> StopRequest:
        self.install()
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


@dataclass
class ContinuousResult:
    updates: list[UpdateResult] = field(default_factory=list)
    stopped_by: str | None = None
    seconds: float = 0.0

    def total(self, metric: str, target: str | None = None) -> int:
        """`metric` summed over every update's flows (into `target` when given)."""
        return sum(getattr(f, metric) for u in self.updates for f in u.flows
                   if target is None or f.target == target)

    def summary(self, bronze: str, quarantine: str) -> str:
        """One line: how many updates, what they read and quarantined, why it stopped."""
        return (f"Continuous run stopped ({self.stopped_by or 'finished'}) after "
                f"{len(self.updates)} update{'' if len(self.updates) == 1 else 's'} in "
                f"{self.seconds:.1f}s: {self.total('input_rows', bronze):,} records in, "
                f"{self.total('output_rows', quarantine):,} quarantined")


def update_line(update: UpdateResult, bronze: str = "bronze_kafka_events",
                quarantine: str = "quarantine") -> str:
    """What a continuous run prints after each update."""
    return (f"update {update.update_id[:8]} finished in {update.seconds:.1f}s: "
            f"{update.flow_input(bronze):,} records in, {update.flow_output(quarantine):,} "
            "quarantined")


def run_continuous(spark: SparkSession, settings: Settings | None,
                   warehouse: StoragePath | str, trigger_interval: float, stop: StopRequest,
                   full_refresh: bool | Sequence[str] = False, refresh: Sequence[str] = (),
                   progress: Progress | None = None, pipelines_dir: Path = PIPELINES_DIR,
                   after_update: Callable[[UpdateResult], None] | None = None,
                   new_timeline: Callable[[], Timeline] = Timeline,
                   max_updates: int | None = None, **pipeline: Any) -> ContinuousResult:
    """Run updates every `trigger_interval` seconds until `stop` is set (or `max_updates` ran).

    A full refresh applies to the first update only; `refresh` limits every update. An update
    that fails ends the run with its error, as a triggered one does. `pipeline`: what
    run_pipeline takes of a bundle's pipeline (files, root_path, scope, configuration).
    """
    result = ContinuousResult()
    began = time.monotonic()
    with WarehouseLock(warehouse):
        while not stop.is_set():
            started = time.monotonic()
            update = run_update(spark, settings, warehouse,
                                full_refresh=full_refresh if not result.updates else False,
                                progress=progress, pipelines_dir=pipelines_dir,
                                refresh=refresh, timeline=new_timeline(), **pipeline)
            result.updates.append(update)
            if after_update is not None:
                after_update(update)
            if max_updates is not None and len(result.updates) >= max_updates:
                break
            stop.wait(trigger_interval - (time.monotonic() - started))
    result.stopped_by, result.seconds = stop.signal, time.monotonic() - began
    return result
