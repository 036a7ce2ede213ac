"""The session in user code, as on Databricks: the `spark` global, `getActiveSession()` and
`builder.getOrCreate()` on every thread that runs a flow, a view or a snapshot function; Python
UDFs with the project's interpreter; and each flow's `spark_conf` for that flow only.

Databricks' pages: "Develop pipeline code with Python"
(https://docs.databricks.com/aws/en/ldp/developer/python-dev), the `spark_conf` parameter of
`table` / `materialized_view` ("A list of Spark configurations for the execution of this query",
https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-materialized-view) and
`create_auto_cdc_from_snapshot_flow`'s function source
(https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes-from-snapshot).
Each pipeline is a few rows in this process's shared session.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from pyspark.sql import SparkSession

from exactly_once import cli
from exactly_once.local.execution.pipeline import run_pipeline


def pipeline(tmp_path, source: str):
    root = tmp_path / "pipelines"
    root.mkdir()
    (root / "defs.py").write_text(textwrap.dedent(source))
    return root


def rows(spark, warehouse, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(str(warehouse / table))
                  .collect())


# Each flow kind records what its thread sees: the active session, the builder's session and the
# `spark` global, as the same JVM session or not.
SESSIONS = """
    import json
    from pyspark import pipelines as dp
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    def seen(kind):
        active = SparkSession.getActiveSession()
        built = SparkSession.builder.getOrCreate()
        same = (active is not None and built is active
                and active._jsparkSession.equals(spark._jsparkSession))
        return active.createDataFrame([(kind, same)], "kind STRING, same BOOLEAN")

    @dp.table(name="streamed")
    def streamed():
        SparkSession.getActiveSession().createDataFrame([], "x INT")  # fails on None
        return (SparkSession.getActiveSession().readStream.schema("n BIGINT").json("{inbox}")
                .select(F.lit("stream").alias("kind"), F.lit(True).alias("same")))

    @dp.temporary_view(name="in_view")
    def in_view():
        return seen("view")

    @dp.materialized_view(name="kinds")
    def kinds():
        return seen("materialized view").unionByName(spark.read.table("in_view"))

    dp.create_streaming_table("snapshots")

    def next_snapshot_and_version(latest_snapshot_version):
        if latest_snapshot_version is not None:
            return None
        snapshot = seen("snapshot").withColumn("id", F.lit(1))
        return snapshot, 1

    dp.create_auto_cdc_from_snapshot_flow(target="snapshots", source=next_snapshot_and_version,
                                          keys=["id"])
"""


def test_every_flow_thread_has_the_pipeline_s_session(spark, settings, tmp_path):
    """On Databricks the snapshot function builds its DataFrame with the session it finds;
    flows run in threads here, which had no active session (`'NoneType' object has no
    attribute 'createDataFrame'`)."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "0.json").write_text('{"n": 1}\n')
    root = pipeline(tmp_path, SESSIONS.replace("{inbox}", str(inbox)))
    warehouse = tmp_path / "warehouse"
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert rows(spark, warehouse, "kinds") == [("materialized view", True), ("view", True)]
    assert rows(spark, warehouse, "snapshots") == [("snapshot", True, 1)]
    assert rows(spark, warehouse, "streamed") == [("stream", True)]


UDFS = """
    import pandas as pd
    from pyspark import pipelines as dp
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    def plus_one(n):
        return n + 1

    spark.udf.register("plus_one", plus_one, "long")  # at module level: pickled as the file loads

    @F.udf("string")
    def shout(text):
        return text.upper()

    @pandas_udf("long")
    def doubled(values: pd.Series) -> pd.Series:
        return values * 2

    @dp.materialized_view(name="computed")
    def computed():
        return (spark.range(3).selectExpr("id", "plus_one(id) AS plus_one")
                .withColumn("shout", shout(F.lit("a"))).withColumn("doubled", doubled("id")))
"""


def test_python_udfs_run_with_the_project_s_interpreter(spark, settings, tmp_path):
    """Decorated (`@F.udf`, `@pandas_udf`, which needs pyarrow) and registered at module level
    (`spark.udf.register`): the workers are this interpreter, and a pipeline file's functions
    travel by value (a worker cannot import the file)."""
    warehouse = tmp_path / "warehouse"
    run_pipeline(spark, settings, warehouse, pipelines_dir=pipeline(tmp_path, UDFS))
    assert rows(spark, warehouse, "computed") == [(0, 1, "A", 0), (1, 2, "A", 2),
                                                   (2, 3, "A", 4)]


SPARK_CONF = """
    import threading
    from pyspark import pipelines as dp
    from pyspark.sql import functions as F

    TOKYO = {"spark.sql.session.timeZone": "Asia/Tokyo"}
    # Both materialized views build their queries at the same time, in two threads of one
    # session: each must see its own time zone.
    together = threading.Barrier(2, timeout=60)

    @dp.table(name="events")
    def events():
        return spark.readStream.schema("ts TIMESTAMP").json("{inbox}")

    def hours():
        together.wait()
        return spark.read.table("events").select(
            F.hour("ts").alias("hour"), F.lit(spark.conf.get("spark.sql.session.timeZone"))
            .alias("zone"), F.current_timezone().alias("analyzed_in"))

    @dp.materialized_view(name="tokyo_hours", spark_conf=TOKYO)
    def tokyo_hours():
        return hours()

    @dp.materialized_view(name="utc_hours")
    def utc_hours():
        return hours()

    @dp.table(name="tokyo_stream", spark_conf=TOKYO)
    def tokyo_stream():
        return spark.readStream.table("events").select(F.hour("ts").alias("hour"))
"""


def test_spark_conf_applies_to_its_flow_only(spark, settings, tmp_path):
    """`spark.sql.session.timeZone` = Asia/Tokyo on one materialized view changes its hours
    only: midnight UTC is 9 in Tokyo; a flow running beside it in the same session, and the
    session itself afterwards, keep UTC."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "0.json").write_text(json.dumps({"ts": "2024-01-01T00:00:00Z"}) + "\n")
    warehouse = tmp_path / "warehouse"
    run_pipeline(spark, settings, warehouse,
                 pipelines_dir=pipeline(tmp_path, SPARK_CONF.replace("{inbox}", str(inbox))))
    assert rows(spark, warehouse, "tokyo_hours") == [(9, "Asia/Tokyo", "Asia/Tokyo")]
    assert rows(spark, warehouse, "utc_hours") == [(0, "UTC", "UTC")]
    assert rows(spark, warehouse, "tokyo_stream") == [(9,)]
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert SparkSession.getActiveSession() is spark


def test_dry_run_analyzes_a_flow_with_its_spark_conf(in_session, tmp_path, capsys):
    """A query that analyzes only with its flow's settings (two columns differing in case
    alone are ambiguous unless `spark.sql.caseSensitive`) passes dry-run as it runs."""
    root = pipeline(tmp_path, """
        from pyspark import pipelines as dp

        @dp.materialized_view(name="cased", spark_conf={"spark.sql.caseSensitive": "true"})
        def cased():
            return spark.sql("SELECT 1 AS a, 2 AS A").select("a")

        @dp.materialized_view(name="reader", spark_conf={"spark.sql.caseSensitive": "true"})
        def reader():
            return spark.read.table("cased").selectExpr("a", "a + 1 AS A").select("A")
        """)
    assert cli.main(["dry-run", "--pipelines", str(root)]) == 0, capsys.readouterr().err
    assert in_session.conf.get("spark.sql.caseSensitive") == "false"


# The UDF pipeline's update as a driver of its own on the standalone cluster: its Python workers
# run in the executors, which the cluster's workers start.
ON_THE_CLUSTER = """
import sys
from pathlib import Path
from exactly_once.local.engine.deployment import deployment
from exactly_once.local.engine.session import build_session
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.settings.engine import load_engine
from exactly_once.settings.pipeline import load_settings

master, pipelines, warehouse = sys.argv[1:]
spark = build_session(warehouse, deployment=deployment(load_engine(master=master), warehouse))
run_pipeline(spark, load_settings(), warehouse, pipelines_dir=Path(pipelines))
rows = spark.read.format("delta").load(warehouse + "/computed").orderBy("id").collect()
print([tuple(r) for r in rows])
"""


def test_python_udfs_run_on_the_standalone_cluster(spark_cluster, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", ON_THE_CLUSTER, spark_cluster.url,
         str(pipeline(tmp_path, UDFS)), str(tmp_path / "warehouse")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "[(0, 1, 'A', 0), (1, 2, 'A', 2), (2, 3, 'A', 4)]"
