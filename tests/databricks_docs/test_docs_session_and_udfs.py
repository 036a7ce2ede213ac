"""The Spark session in user code and Python UDFs, as Databricks documents them: a function of
the pipeline (a view, a materialized view, a snapshot function) finds the session with
`SparkSession.getActiveSession()` or `SparkSession.builder.getOrCreate()`, and Python UDFs,
decorated or registered at a file's top level, run in the pipeline's queries.

Pages:
- getActiveSession, "Returns the active SparkSession for the current thread":
  https://docs.databricks.com/aws/en/pyspark/reference/classes/sparksession/getActiveSession
- getOrCreate: https://docs.databricks.com/aws/en/pyspark/reference/classes/sparksession/builder
- User-defined scalar functions - Python (register, @udf): https://docs.databricks.com/aws/en/udf/python
- create_auto_cdc_from_snapshot_flow (the snapshot function):
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes-from-snapshot
"""

from __future__ import annotations

from docs_corpus import dp_file, pipeline, rows, run

ACTIVE_SESSION = ("https://docs.databricks.com/aws/en/pyspark/reference/classes/sparksession/"
                  "getActiveSession")
PYTHON_UDF = "https://docs.databricks.com/aws/en/udf/python"


def test_the_session_and_udfs_in_every_function_of_a_pipeline(spark, settings, tmp_path):
    """ACTIVE_SESSION in a view's function (run where its reader's query is built), getOrCreate
    in a materialized view's, getActiveSession in a snapshot function; PYTHON_UDF's `squared`,
    registered with spark.udf.register at the file's top level and used from SQL, and its
    `@udf("long")` twin: the squares of 1, 2 and 3."""
    root = pipeline(tmp_path, squares=dp_file('''
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import udf
        from pyspark.sql.types import LongType

        def squared(s):
          return s * s
        spark.udf.register("squaredWithPython", squared, LongType())

        @udf("long")
        def squared_udf(s):
          return s * s

        @dp.temporary_view
        def numbers():
          return SparkSession.getActiveSession().range(1, 4)

        @dp.materialized_view
        def squares():
          return spark.read.table("numbers").select(
            "id",
            squared_udf("id").alias("id_squared"),
            F.expr("squaredWithPython(id)").alias("id_squared_sql"))

        @dp.materialized_view
        def built():
          return SparkSession.builder.getOrCreate().createDataFrame(
            [(1, "Alice")], "id BIGINT, name STRING")

        def next_snapshot_and_version(latest_snapshot_version):
          if latest_snapshot_version is None:
            session = SparkSession.getActiveSession()
            return (session.createDataFrame([(1, "Alice")], "id BIGINT, name STRING"), 1)
          return None

        dp.create_streaming_table("people")
        dp.create_auto_cdc_from_snapshot_flow(
          target = "people",
          source = next_snapshot_and_version,
          keys = ["id"])
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    assert rows(spark, warehouse / "squares") == [(1, 1, 1), (2, 4, 4), (3, 9, 9)]
    assert rows(spark, warehouse / "built") == [(1, "Alice")]
    assert rows(spark, warehouse / "people") == [(1, "Alice")]
