"""What a session over a warehouse gets from where the warehouse is (engine/deployment.py)."""

from __future__ import annotations

from exactly_once.local.engine.deployment import deployment
from exactly_once.settings.engine import load_engine


def checkpoint_manager(spark, conf: dict[str, str], directory) -> str:
    """The class of Spark's checkpoint file manager for `directory` under `conf`, as Spark picks
    it for a query's offsets and commits and a state store's files (`CheckpointFileManager`)."""
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    for key, value in conf.items():
        if key.startswith("spark.sql."):  # SQL settings reach Hadoop's configuration as they are
            hadoop.set(key, value)
    manager = jvm.org.apache.spark.sql.execution.streaming.checkpointing \
        .CheckpointFileManager.create(jvm.org.apache.hadoop.fs.Path(str(directory)), hadoop)
    return manager.getClass().getSimpleName()


def test_a_warehouse_on_the_store_keeps_checkpoints_through_s3a_s_cached_file_system(
        spark, tmp_path):
    """S3A's FileContext binding builds a new S3AFileSystem (its AWS client too) for every
    checkpoint log a query opens, about a sixth of a small update's CPU on the store
    (BENCHMARKS.md, "The object store"): a session over the store takes Spark's FileSystem-based
    manager, which uses the file system Hadoop caches. A local warehouse keeps Spark's default."""
    engine = load_engine("local")
    on_store = deployment(engine, "s3a://lake/warehouse").conf
    on_disk = deployment(engine, tmp_path / "warehouse").conf
    assert checkpoint_manager(spark, dict(on_store), tmp_path) == \
        "FileSystemBasedCheckpointFileManager"
    assert checkpoint_manager(spark, dict(on_disk), tmp_path) == \
        "FileContextBasedCheckpointFileManager"
