"""The Spark JVMs' own options: when they compile Java code with C2 and how they collect
garbage; the driver also maps the class archive (class_archive.py). In `local[N]` the driver is
the whole engine; on a cluster each executor is a JVM of its own, started for one update.

An update is many short queries over a few hundred rows each: hundreds of thousands of
methods of Spark, Delta and Scala run some thousand times each, and few loops run long. With
the JVM's default thresholds C2, the optimizing compiler, took every method called 5,000
times and kept compiling for minutes: a third of the driver's CPU in a warm update, more in
the first (BENCHMARKS.md, issue 25). C2 now takes a method once it has been called 30 times
as often (or looped as long), so it compiles what runs per row of a large update and leaves
the rest to C1. Measured on a warm ~100-record update, a new process's first one and 200,000
events, against the defaults and C1 alone (which made 200,000 events 1.7x slower) and 10x
and 100x the thresholds (100x: per-row code waits too long for C2).

The parallel collector spends less CPU than G1 on this heap's short-lived garbage, and has no
concurrent threads competing for the two cores.

The JVMs' own time zone is UTC, as the session's is, whatever the machine's. Delta checks the
three (the session's, the JVM's default and `user.timezone`): if any is not UTC, it rebuilds a
small table's whole state after every commit to verify the file list its checksum carries
(`allFilesInCrc.verificationMode.forceOnNonUTC`, against timestamps before 1883 that a
non-UTC zone serializes differently). On a laptop in Los Angeles that was 98 Spark jobs in a
warm ~100-record update instead of 74 (BENCHMARKS.md, issue 25). The session now keeps no file
list in checksums at all (session.py), so nothing is verified whatever the zone; the JVMs stay
in UTC so that the three agree.

A cluster's executors run the same short tasks in JVMs that live one update: with the same two
options an update of 630 records on the local 2-worker cluster took 0.7 of its time with HotSpot's
defaults (BENCHMARKS.md, "Beyond one machine"). The executors take the driver's options
(`java_options`, engine/session.py), its JIT choice too: with C1 alone, an update of 500 events on
that cluster took 0.88 of its time and 0.81 of the executors' CPU (BENCHMARKS.md, "The cluster").
They map the driver's class archive too: it fits a JVM whose launch class path begins as the one it
was written with, so the session gives the executors the driver's (session.py); with it the same
update took 0.82 of its time and 0.70 of the executors' CPU. (Mapped with the executors' own class
path, the JVM skipped it silently: that measured no faster.)

A process that runs one small update ends before most of those methods are worth profiling:
`EXACTLY_ONCE_JIT=c1` starts the driver with C1 alone (`-XX:TieredStopAtLevel=1`: compiled
once, without the profiling that feeds C2), keeping tiered's code cache. One `exactly-once run`
process took 0.80-0.84 of its time for ~300 records and 0.78 for the demo's 6,300, but 1.58x as
long for 200,000 events (BENCHMARKS.md, "The first update"), and a long-lived session's warm
updates were slower too: so the default stays `tiered`, and the choice is the caller's (the
tests give it to the one-update processes they start, never to their own sessions).
"""

from __future__ import annotations

import os

from exactly_once.errors import SettingsError
from exactly_once.local.engine import class_archive

# C2's thresholds, 30x HotSpot's (Tier4*: 5,000 calls; 600 with 15,000 calls + loop
# iterations; 15,000; 40,000 loop iterations for on-stack replacement).
JIT = ("-XX:Tier4InvocationThreshold=150000 -XX:Tier4MinInvocationThreshold=18000 "
       "-XX:Tier4CompileThreshold=450000 -XX:Tier4BackEdgeThreshold=1200000")
# C1 alone, with the code cache HotSpot gives tiered (240 MB): alone it would get 48 MB, which a
# continuous run's updates filled ("Out of space in CodeCache for adapters", a failed update).
C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
JIT_VARIABLE = "EXACTLY_ONCE_JIT"
JITS = {"tiered": JIT, "c1": C1_ONLY}
DEFAULT_JIT = "tiered"
GC = "-XX:+UseParallelGC"
ZONE = "-Duser.timezone=UTC"


def jit_options(jit: str | None = None) -> str:
    """The driver's JIT options: `jit`'s, else `EXACTLY_ONCE_JIT`'s, else tiered (`JITS`)."""
    choice = jit or os.environ.get(JIT_VARIABLE) or DEFAULT_JIT
    if choice not in JITS:
        raise SettingsError(f"{JIT_VARIABLE}={choice}: the JIT is one of "
                            f"{', '.join(JITS)} (the default: {DEFAULT_JIT})")
    return JITS[choice]


def java_options(*more: str, jit: str | None = None) -> str:
    """`spark.driver.extraJavaOptions` of a session, and its executors' on a cluster: the JIT's
    (`jit_options`), the collector's and the zone, the class archive when `make setup` has built it,
    then `more`."""
    return " ".join(option for option in (jit_options(jit), GC, ZONE,
                                          class_archive.java_options(), *more) if option)
