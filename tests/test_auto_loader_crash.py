"""An Auto Loader stream killed mid-update (SIGKILL of the update's process group, its JVM
included), then an update that finishes: every file's rows once, none lost, none twice, as the
Kafka source's crash tests require of records (test_crash_sweep.py).

Auto Loader's promise: "As files are discovered, their metadata is persisted in a scalable
key-value store (RocksDB) in the checkpoint location of your Auto Loader pipeline. ... in case
of failures, Auto Loader can resume from where it left off ... and continue to provide
exactly-once guarantees when writing data into Delta Lake"
(https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/). Locally the
checkpoint is Spark's file stream source log (local/auto_loader/reader.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from exactly_once.local.execution.pipeline import run_pipeline

RUN_TIMEOUT = 300
PIPELINE = """
    from pyspark import pipelines as dp

    @dp.table(name="landed")
    def landed():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .option("cloudFiles.maxFilesPerTrigger", "1").load("{root}")
                .select("*", "_metadata.file_name"))
"""
UPDATE = """
import sys
from pathlib import Path
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.settings.pipeline import load_settings
spark = build_session(Path(sys.argv[1]) / "spark-warehouse", app_name="killed")
run_pipeline(spark, load_settings("local"), Path(sys.argv[1]), pipelines_dir=Path(sys.argv[2]))
"""


def test_a_killed_update_then_one_that_finishes_reads_each_file_once(spark, settings, tmp_path):
    data, warehouse, root = tmp_path / "in", tmp_path / "warehouse", tmp_path / "pipelines"
    data.mkdir()
    root.mkdir()
    for n in range(4):
        (data / f"{n}.json").write_text(json.dumps({"n": n}) + "\n")
    (root / "defs.py").write_text(textwrap.dedent(PIPELINE.replace("{root}", str(data))))
    # Killed once its second micro-batch (one file each) is planned: logged, maybe written.
    marker = warehouse / "_pipeline" / "checkpoints" / "landed" / "offsets" / "1"
    process = subprocess.Popen([sys.executable, "-c", UPDATE, str(warehouse), str(root)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True,
                               env=os.environ | {"EXACTLY_ONCE_HOME": str(tmp_path / "home")})
    deadline = time.monotonic() + RUN_TIMEOUT
    while not marker.exists():
        assert process.poll() is None, process.stderr.read().decode()[-2000:] \
            if process.stderr else "ended"
        assert time.monotonic() < deadline, f"{marker} did not appear"
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()

    (data / "4.json").write_text(json.dumps({"n": 4}) + "\n")  # arrives while it was down
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    table = spark.read.format("delta").load(str(warehouse / "landed"))
    assert sorted(tuple(r) for r in table.select("n", "file_name").collect()) == [
        (str(n), f"{n}.json") for n in range(5)]
    assert result.table_rows["landed"] == 5
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)  # nothing new: nothing again
    assert table.count() == 5
