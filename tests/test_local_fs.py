"""The session's local file system (engine/local_fs.py, engine/jvm/local-fs): the calls that
started a `chmod` or `readlink` process start none, and what Delta's commits and Structured
Streaming's checkpoint files rely on is unchanged: a file's permission, a rename that never
overwrites."""

from __future__ import annotations

import stat

import pytest
from py4j.protocol import Py4JJavaError

from exactly_once.local.engine.jvm_processes import ProcessRecording


@pytest.fixture
def hadoop(spark):
    jvm = spark.sparkContext._jvm
    return jvm, spark.sparkContext._jsc.hadoopConfiguration()


def test_file_paths_go_through_the_project_s_classes(hadoop, tmp_path):
    jvm, conf = hadoop
    path = jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri())
    assert path.getFileSystem(conf).getClass().getName() == "exactlyonce.localfs.NioLocalFileSystem"
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(path.toUri(), conf)
    assert context.getDefaultFileSystem().getClass().getName() == "exactlyonce.localfs.NioLocalFs"


def test_create_and_rename_start_no_process_and_never_overwrite(spark, hadoop, tmp_path):
    jvm, conf = hadoop
    gateway = spark.sparkContext._gateway
    Path = jvm.org.apache.hadoop.fs.Path
    fs = Path(tmp_path.as_uri()).getFileSystem(conf)
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(Path(tmp_path.as_uri()).toUri(),
                                                                   conf)
    no_overwrite = gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    no_overwrite[0] = jvm.org.apache.hadoop.fs.Options.Rename.NONE

    recording = ProcessRecording(spark).start()
    for name in ("a", "b", "c"):  # FileSystem.create: Hadoop's chmod after each create
        out = fs.create(Path((tmp_path / name).as_uri()), False)
        out.write(name.encode())
        out.close()
    # FileContext.rename: Hadoop's two readlink, as for a checkpoint file or a Delta commit.
    context.rename(Path((tmp_path / "a").as_uri()), Path((tmp_path / "d").as_uri()), no_overwrite)
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        context.rename(Path((tmp_path / "b").as_uri()), Path((tmp_path / "c").as_uri()),
                       no_overwrite)
    started = recording.stop()

    assert started == []
    assert (tmp_path / "d").read_text() == "a" and not (tmp_path / "a").exists()
    assert (tmp_path / "c").read_text() == "c" and (tmp_path / "b").read_text() == "b"
    # The permission Hadoop's chmod gave: the default file mode less the umask (022).
    assert stat.S_IMODE((tmp_path / "c").stat().st_mode) == 0o644


def test_the_recording_sees_a_process_the_jvm_starts(spark):
    """The check above can fail: a process started from the JVM is recorded, with its caller."""
    jvm = spark.sparkContext._jvm
    recording = ProcessRecording(spark).start()
    jvm.org.apache.hadoop.fs.FileUtil.readLink(jvm.java.io.File("/"))
    started = recording.stop()
    assert [(s.program, s.caller) for s in started] == [("readlink", "FileUtil.readLink")]


def test_spark_s_recursive_deletes_start_no_process(spark, tmp_path):
    """Spark's `JavaUtils.deleteRecursively` (a RocksDB state store's local directory on each
    load and close, a cloned session's artifacts) deletes in the JVM, not with `rm -rf`."""
    jvm = spark.sparkContext._jvm
    tree = tmp_path / "store"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "file").write_text("x")
    (tree / "link").symlink_to(tmp_path)  # a link is removed, never followed
    (tmp_path / "kept").write_text("y")
    recording = ProcessRecording(spark).start()
    jvm.org.apache.spark.network.util.JavaUtils.deleteRecursively(jvm.java.io.File(str(tree)))
    started = recording.stop()
    assert started == []
    assert not tree.exists() and (tmp_path / "kept").read_text() == "y"
