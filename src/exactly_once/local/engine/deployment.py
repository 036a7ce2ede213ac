"""Where the session runs and what its executors need: the master, the driver's address, the
executors' Python, and the object store's connector when the warehouse is on one.

`local[N]` (the default) runs everything in the driver's JVM. `spark://HOST:PORT` runs tasks in
executors on a standalone cluster's workers (cluster.py starts one here): the driver ships them
the jars the pyspark wheel lacks (`spark.jars`: Delta, the Kafka source and, for an `s3a://`
warehouse, Hadoop's S3A connector with the AWS SDK modules it uses) and names their Python
(`spark.pyspark.python`).

A Python UDF of a pipeline file runs in Python worker processes, in `local[N]` and on a
cluster's executors alike: `python` is their interpreter, this one by default, whose environment
has the project's dependencies (pyarrow for `pandas_udf` and Arrow UDFs). Without it pyspark
starts whatever `python3` comes first on PATH. The project's own pipeline runs no UDF (every
flow is Spark SQL, and `foreachBatch` runs on the driver).

Everything the object store needs is scheme-specific (`fs.s3a.*`, `spark.delta.logStore.s3a.impl`)
or set only in a session over the store (its streaming checkpoints' file manager): a local
warehouse's files go through exactly the settings they did before.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from exactly_once.errors import ClusterError
from exactly_once.paths import JARS_DIR, LOCAL_DIR
from exactly_once.settings.engine import EngineSettings, ObjectStoreSettings

OBJECT_STORE_SCHEME = "s3a"
S3A_JARS = JARS_DIR / "s3a"
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
FILE_SYSTEM_CHECKPOINTS = \
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


@dataclass(frozen=True)
class Deployment:
    """What `build_session` needs beyond its own settings; the default is `local[2]` with
    nothing more."""

    master: str = "local[2]"
    conf: Mapping[str, str] = field(default_factory=dict)
    jar_dirs: tuple[Path, ...] = ()  # jars beyond Delta and the Kafka source
    python: str = sys.executable  # the Python workers' interpreter (UDFs)

    @property
    def is_cluster(self) -> bool:
        return not self.master.startswith("local")


def on_object_store(warehouse: object) -> bool:
    """Whether the warehouse (a path, or a URL such as `s3a://bucket/prefix`) is on the object
    store rather than on the local filesystem."""
    return str(warehouse).startswith(f"{OBJECT_STORE_SCHEME}://")


def deployment(engine: EngineSettings, warehouse: object) -> Deployment:
    """The deployment of a session over `warehouse` with `engine`'s settings."""
    # The driver's scratch space (block manager, RocksDB's working copies) under .local/.
    conf: dict[str, str] = {"spark.local.dir": str(LOCAL_DIR / "scratch")}
    if engine.driver_host:
        conf["spark.driver.host"] = engine.driver_host
    if engine.driver_bind_address or engine.driver_host:
        conf["spark.driver.bindAddress"] = engine.driver_bind_address or engine.driver_host
    if not engine.master.startswith("local"):
        conf |= {
            # The executors' Python: this interpreter, whose environment has the project's
            # dependencies (on another machine, the same path must hold the same venv).
            "spark.pyspark.python": sys.executable,
            "spark.executor.memory": engine.executor_memory,
            # A dead worker's tasks are re-run elsewhere; more attempts than the default 4
            # would only hide a task that fails by itself.
            "spark.task.maxFailures": "4",
        }
    jar_dirs: tuple[Path, ...] = ()
    if on_object_store(warehouse):
        conf |= s3a_conf(engine.object_store)
        jar_dirs = (S3A_JARS,)
    return Deployment(engine.master, conf, jar_dirs)


def s3a_conf(store: ObjectStoreSettings) -> dict[str, str]:
    """Hadoop's S3A connector for `s3a://` paths, and Delta's log store for them.

    Delta on S3 allows one writing driver per table (`S3SingleDriverLogStore`: S3 has no atomic
    put-if-absent that Delta's log store uses); the warehouse lock (storage/lock.py, a
    conditional create on the store) is what guarantees one update, so one driver, at a time.
    Credentials come from the environment (S3A's default provider chain; Spark also copies
    AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY into the Hadoop settings its tasks get).
    """
    conf = {
        "spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore",
        # Streaming checkpoints (offsets, commits, state stores' files) through the FileSystem
        # S3A caches, not Spark's default FileContext: S3A's FileContext binding initializes a
        # new S3AFileSystem (its AWS client built anew) for every checkpoint log a query opens,
        # about a sixth of a small update's CPU on the store (BENCHMARKS.md). Both write a
        # temporary object and rename it (a copy, as S3 has no rename), so nothing else
        # changes; one writer at a time is the warehouse lock's guarantee either way.
        CHECKPOINT_FILE_MANAGER: FILE_SYSTEM_CHECKPOINTS,
        "spark.hadoop.fs.s3a.endpoint.region": store.region,
        "spark.hadoop.fs.s3a.path.style.access": str(store.path_style).lower(),
        # A store that stops answering fails the update within a minute, not after S3A's
        # default of 20 retries with backoff.
        "spark.hadoop.fs.s3a.attempts.maximum": "3",
        "spark.hadoop.fs.s3a.retry.limit": "3",
        "spark.hadoop.fs.s3a.connection.establish.timeout": "5s",
        # Uploads buffered in memory, not in files under /tmp (hadoop.tmp.dir).
        "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer",
    }
    if store.endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = store.endpoint
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            store.endpoint.startswith("https://")).lower()
    return conf


def require_master(master: str, timeout: float = 5) -> None:
    """A `spark://HOST:PORT` master must answer before a session starts: Spark itself would
    retry for a minute, then fail with a stack trace."""
    if not master.startswith("spark://"):
        return
    host, _, port = master.removeprefix("spark://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except OSError:
        raise ClusterError(f"no Spark master answers at {master}; start the local cluster with "
                           "`exactly-once cluster start`, or name a running master") from None
