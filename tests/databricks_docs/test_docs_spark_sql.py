"""`spark.sql(...)` in a dataset function reads the pipeline's own datasets, as Databricks'
metaprogramming tutorial writes it: tables made in a factory function called in a `for` loop,
each querying another dataset of the pipeline with `spark.sql("... FROM LIVE.<name> ...")` or by
its bare name. The legacy `LIVE.` schema names the same dataset.

Pages:
- metaprogramming ("Create multiple flows with different parameters", the fire department
  example: a factory of `@dp.table`s whose queries are `spark.sql` over a raw table):
  https://docs.databricks.com/aws/en/ldp/developer/ldp-metaprogramming
- LIVE schema (legacy): https://docs.databricks.com/aws/en/ldp/live-schema
- STREAM in a query (`STREAM(name)` reads a dataset as a stream):
  https://docs.databricks.com/aws/en/ldp/developer/sql-dev
"""

from __future__ import annotations

from docs_corpus import ERROR, dp_file, json_files, pipeline, rows, run

from exactly_once import cli

METAPROGRAMMING = "https://docs.databricks.com/aws/en/ldp/developer/ldp-metaprogramming"

CALLS = [
    {"call_type": "Alarms", "neighborhood": "Mission", "delay": 3.0},
    {"call_type": "Alarms", "neighborhood": "Mission", "delay": 5.0},
    {"call_type": "Alarms", "neighborhood": "Presidio", "delay": 2.0},
    {"call_type": "Medical Incident", "neighborhood": "Mission", "delay": 7.0},
    {"call_type": "Medical Incident", "neighborhood": "Tenderloin", "delay": 1.0},
]


def fire_department(calls: str) -> str:
    """METAPROGRAMMING's shape: a raw table, then a factory called in a loop whose tables query
    it (and each other) with spark.sql, one by `LIVE.`, one by its bare name; a streaming table
    over `STREAM(LIVE.raw_stream)`, a temporary view and an AUTO CDC FROM SNAPSHOT function,
    each reading with spark.sql too."""
    return dp_file(f'''
        @dp.table(name="raw_calls", comment="raw table for fire department response")
        def raw_calls():
          return spark.read.format("json").schema(
            "call_type STRING, neighborhood STRING, delay DOUBLE").load("{calls}")

        @dp.table(name="raw_stream")
        def raw_stream():
          return spark.readStream.format("json").schema(
            "call_type STRING, neighborhood STRING, delay DOUBLE").load("{calls}")

        def generate_tables(call_table, response_table, filter):
          @dp.table(name=call_table, comment="top level tables by call type")
          def create_call_table():
            return spark.sql("""
              SELECT neighborhood, delay
              FROM LIVE.raw_calls
              WHERE call_type = '{{filter}}'
            """.format(filter=filter))

          @dp.table(name=response_table, comment="neighborhoods by response time")
          def create_response_table():
            return spark.sql("""
              SELECT neighborhood, AVG(delay) AS response_time
              FROM {{call_table}}
              GROUP BY 1
            """.format(call_table=call_table))

        for call_table, response_table, filter in [
            ("alarms_table", "alarms_response", "Alarms"),
            ("medical_table", "medical_response", "Medical Incident")]:
          generate_tables(call_table, response_table, filter)

        @dp.temporary_view
        def mission():
          return spark.sql("SELECT * FROM live.raw_calls WHERE neighborhood = 'Mission'")

        @dp.table
        def mission_calls():
          return spark.sql("SELECT call_type, count(*) AS calls FROM mission GROUP BY 1")

        @dp.table
        def streamed():
          return spark.sql("SELECT call_type, delay FROM STREAM(LIVE.raw_stream)")

        def next_snapshot_and_version(latest_snapshot_version):
          if latest_snapshot_version is None:
            return (spark.sql("SELECT DISTINCT neighborhood FROM alarms_table"), 1)
          return None

        dp.create_streaming_table("alarm_neighborhoods")
        dp.create_auto_cdc_from_snapshot_flow(
          target="alarm_neighborhoods",
          source=next_snapshot_and_version,
          keys=["neighborhood"])
        ''')


def test_spark_sql_reads_the_pipeline_s_datasets(spark, settings, tmp_path, in_session, capsys):
    """METAPROGRAMMING: each generated table holds its call type's rows, each response table
    their averages; the view, the stream and the snapshot function read by spark.sql too; and
    `dry-run` analyzes the same pipeline without a problem."""
    calls = json_files(tmp_path / "calls", a=CALLS)
    root = pipeline(tmp_path, fire=fire_department(str(calls)))
    assert cli.main(["dry-run", "--pipelines", str(root)]) == 0, capsys.readouterr()
    capsys.readouterr()
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    assert rows(spark, warehouse / "alarms_table") == [
        ("Mission", 3.0), ("Mission", 5.0), ("Presidio", 2.0)]
    assert rows(spark, warehouse / "alarms_response") == [("Mission", 4.0), ("Presidio", 2.0)]
    assert rows(spark, warehouse / "medical_response") == [("Mission", 7.0), ("Tenderloin", 1.0)]
    assert rows(spark, warehouse / "mission_calls") == [("Alarms", 2), ("Medical Incident", 1)]
    assert len(rows(spark, warehouse / "streamed")) == len(CALLS)
    assert rows(spark, warehouse / "alarm_neighborhoods") == [("Mission",), ("Presidio",)]


def test_spark_sql_of_an_unknown_dataset_is_one_line(in_session, tmp_path, capsys):
    """A spark.sql query that names no dataset of the pipeline and no table is `dry-run`'s one
    line naming the dataset whose query made it, in the words of a `spark.read.table` of it."""
    root = pipeline(tmp_path, fire=dp_file('''
        @dp.table
        def responses():
          return spark.sql("SELECT * FROM LIVE.raw_callz")
        '''))
    code = cli.main(["dry-run", "--pipelines", str(root)])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith(ERROR), out + err
    assert ("dataset `responses`: reads table `raw_callz` (main.exactly_once_root.raw_callz), "
            "which the pipeline does not define (its datasets: responses) and the local catalog "
            "does not hold") in lines[0], lines[0]
