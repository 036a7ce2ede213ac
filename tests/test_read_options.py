"""Options of a table read in pipeline code reach the read, as on Databricks: what the reader is
given before `table(...)` (Python) or after the name in `WITH (...)` (SQL).

Databricks' "Delta table streaming reads and writes" page
(https://docs.databricks.com/aws/en/structured-streaming/delta-lake) reads a table with
`spark.readStream.option("maxFilesPerTrigger", ...).table(...)` and
`.option("skipChangeCommits", "true")`; a batch read takes `versionAsOf`
(https://docs.databricks.com/aws/en/delta/history). The runtime resolves `table(name)` to a
pipeline dataset or a table of the local catalog itself (graph/reads.py), so it must carry the
reader's options to that read, not drop them.

One update of one small pipeline: a catalog table of two versions (three files), read in time
(`versionAsOf`) and as a stream one file a batch; a pipeline table read so in Python and SQL.
"""

from __future__ import annotations

import textwrap

from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.execution.update import default_scope
from exactly_once.local.graph.dry_run import analyze
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.warehouse import Warehouse

PIPELINE = '''
from pyspark import pipelines as dp

@dp.materialized_view(name="trips_now")
def trips_now():
    return spark.read.table("main.raw.trips")

@dp.materialized_view(name="trips_at_version_0")
def trips_at_version_0():
    return spark.read.option("versionAsOf", 0).table("main.raw.trips")

@dp.table(name="trips_one_file_a_batch")
def trips_one_file_a_batch():
    return spark.readStream.option("maxFilesPerTrigger", 1).table("main.raw.trips")

@dp.table(name="copies", table_properties={"delta.enableChangeDataFeed": "true"})
def copies():
    return spark.readStream.table("main.raw.trips")

@dp.table(name="copies_changes")
def copies_changes():
    return spark.readStream.option("readChangeFeed", "true").table("copies") \
        .select("id", "_change_type")

@dp.table(name="copies_one_file_a_batch")
def copies_one_file_a_batch():
    return spark.readStream.option("maxFilesPerTrigger", "1").table("copies")
'''

SQL = """
CREATE STREAMING TABLE copies_in_sql AS
SELECT * FROM STREAM copies WITH ('maxFilesPerTrigger' = '1');
"""


def test_a_reader_s_options_reach_the_table_it_reads(spark, settings, tmp_path):
    root = tmp_path / "pipeline"
    root.mkdir()
    (root / "reads.py").write_text(textwrap.dedent(PIPELINE))
    (root / "reads.sql").write_text(SQL)
    warehouse = tmp_path / "wh"
    trips = Warehouse(warehouse).catalog_root() / "main" / "raw" / "trips"
    spark.createDataFrame([(1,), (2,)], "id INT").write.format("delta").save(str(trips))
    spark.createDataFrame([(3,)], "id INT").write.format("delta").mode("append") \
        .save(str(trips))  # version 1: a file more

    analysis = analyze(spark, settings, sorted(root.iterdir()), Warehouse(warehouse),
                       scope=default_scope(Warehouse(warehouse)))
    assert [p.message for p in analysis.problems] == [], "dry-run: a change feed's columns too"
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=root)

    def ids(table: str) -> list[int]:
        return sorted(r.id for r in spark.read.format("delta")
                      .load(str(warehouse / table)).collect())

    assert ids("trips_at_version_0") == [1, 2], "time travel: the rows of version 0"
    assert ids("trips_now") == [1, 2, 3], "no options: the latest version's"
    batches = {f.flow: f.batches for f in result.flows}

    def files(path) -> int:
        names = delta_log.plain_parquet_files(str(path))
        assert names is not None and len(names) >= 2, names
        return len(names)

    assert batches["trips_one_file_a_batch"] == files(trips), "a batch per file of the table"
    assert batches["copies_one_file_a_batch"] == files(warehouse / "copies"), \
        "a batch per file of a pipeline table"
    assert batches["copies_in_sql"] == files(warehouse / "copies"), "the same, in SQL"
    for table in ("trips_one_file_a_batch", "copies", "copies_one_file_a_batch",
                  "copies_in_sql"):
        assert ids(table) == [1, 2, 3], table
    changes = spark.read.format("delta").load(str(warehouse / "copies_changes")).collect()
    assert sorted((r.id, r._change_type) for r in changes) == \
        [(1, "insert"), (2, "insert"), (3, "insert")], "the change feed of `copies`"


def test_assert_table_reads_a_delta_table_as_the_reader_it_was_given_would(spark, tmp_path):
    """`assert_table` reads a whole Delta table at its latest version as its log's files
    (testing/compare.py); a read at another version, or of part of it, stays what it was."""
    from exactly_once.testing import assert_table

    path = str(tmp_path / "t")
    spark.createDataFrame([(1,), (2,)], "id INT").write.format("delta").save(path)
    whole = spark.read.format("delta").load(path)  # held across the next commit, as a test may
    spark.createDataFrame([(3,)], "id INT").write.format("delta").mode("append").save(path)
    assert_table(whole, [{"id": 1}, {"id": 2}, {"id": 3}])
    assert_table(spark.read.format("delta").option("versionAsOf", 0).load(path),
                 [{"id": 1}, {"id": 2}])
    assert_table(spark.read.format("delta").load(path).where("id > 1"), [{"id": 2}, {"id": 3}])


def test_a_fixture_and_assert_table_take_columns_whose_names_have_a_dot_or_a_backtick(
        spark, tmp_path):
    """`a.b` is a column's whole name in a JSON fixture and in `assert_table`'s rows, as in a
    Delta table; Spark alone would read it as field b of struct a."""
    from exactly_once.local.catalog.fixtures import read_fixture, write_rows
    from exactly_once.testing import assert_table

    rows = [{"a.b": 1, "c`d": "x"}, {"a.b": 2, "c`d": "y"}]
    fixture = read_fixture(spark, write_rows(tmp_path / "odd.json", rows))
    assert fixture.columns == ["a.b", "c`d"]
    path = str(tmp_path / "t")
    fixture.write.format("delta").save(path)
    assert_table(spark.read.format("delta").load(path), rows)
