"""The session's Hadoop configuration without YARN's defaults (engine/hadoop_defaults.py,
engine/jvm/hadoop-defaults): what a write task carries and a scan broadcasts is Hadoop's core and
MapReduce defaults and the session's settings, not the 527 properties of a resource manager the
local runtime never talks to."""

from __future__ import annotations


def test_a_write_leaves_yarn_s_defaults_out_of_the_session_s_hadoop_configuration(spark, tmp_path):
    # A Delta write loads MapReduce's JobConf, whose static initializer adds yarn-default.xml to
    # the default resources of every Configuration in the JVM, the live ones included.
    spark.range(3).write.format("delta").save(str(tmp_path / "t"))
    conf = spark._jsparkSession.sessionState().newHadoopConf()

    assert conf.get("yarn.resourcemanager.address") is None
    # (MapReduce's defaults name its YARN application master's settings `yarn.app.mapreduce.*`.)
    assert not [key for key in _keys(conf)
                if key.startswith("yarn.") and not key.startswith("yarn.app.mapreduce.")]
    # The other defaults stay: core's, MapReduce's (its committers read them), the session's.
    assert conf.get("fs.defaultFS") == "file:///"
    assert conf.get("mapreduce.job.reduces") == "1"
    assert conf.get("fs.file.impl") == "exactlyonce.localfs.NioLocalFileSystem"


def _keys(conf) -> list[str]:
    entries = conf.iterator()
    keys = []
    while entries.hasNext():
        keys.append(entries.next().getKey())
    return keys
