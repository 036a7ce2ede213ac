"""Auto Loader (`spark.readStream.format("cloudFiles")`) in pipeline files as they deploy, with
Databricks' semantics, and `read_files` for SQL; each case from a Databricks page:

- options: https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/options
  (`cloudFiles.format`, `maxFilesPerTrigger`, `maxBytesPerTrigger`, `includeExistingFiles`:
  "only process new files arriving after initial setup", `pathGlobFilter`);
- schema inference and evolution:
  https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/schema
  (without `inferColumnTypes` JSON and CSV columns are strings; `schemaHints`; the rescued data
  column `_rescued_data` added when the schema is inferred, holding what does not fit with
  `_file_path`; `addNewColumns` stops the stream once and the next run has the column;
  `rescue` never evolves and rescues new columns; pipelines manage the schema location);
- the file metadata column: https://docs.databricks.com/aws/en/ingestion/file-metadata-column;
- `read_files`: https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files.

Tiny files written here, in this process's shared session; a few pipeline runs, several
checks each.
"""

from __future__ import annotations

import json
import re
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_cli_errors import covers

from exactly_once import cli
from exactly_once.errors import DeclarationError, SchemaEvolvedError
from exactly_once.local.execution.pipeline import run_pipeline

ERROR = "exactly-once: error: "


def pipeline(tmp_path, source: str, name: str = "pipelines"):
    root = tmp_path / name
    root.mkdir()
    (root / "defs.py").write_text(textwrap.dedent(source))
    return root


def rows(spark, warehouse, table: str, *columns: str) -> list[tuple]:
    df = spark.read.format("delta").load(str(warehouse / table))
    return sorted(tuple(r) for r in (df.select(*columns) if columns else df).collect())


def write_json(path, *records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


INGEST = """
    from pyspark import pipelines as dp

    def auto_loader(fmt, path, **options):
        reader = spark.readStream.format("cloudFiles").option("cloudFiles.format", fmt)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load(path)

    @dp.table(name="events")
    def events():
        return auto_loader("json", "{root}/events").select("*", "_metadata.file_name")

    @dp.table(name="typed")
    def typed():
        return auto_loader("json", "{root}/typed", **{"cloudFiles.inferColumnTypes": "true",
                           "cloudFiles.schemaHints": "id INT"})

    @dp.table(name="csvs")
    def csvs():
        return auto_loader("csv", "{root}/csvs", header="true", pathGlobFilter="*.csv",
                           **{"cloudFiles.inferColumnTypes": "true"})

    @dp.table(name="parquets")
    def parquets():
        return auto_loader("parquet", "{root}/parquets")

    @dp.table(name="texts")
    def texts():
        return auto_loader("text", "{root}/texts").select("value", "_metadata.file_name")

    @dp.table(name="one_file_a_batch")
    def one_file_a_batch():
        return auto_loader("json", "{root}/capped", **{"cloudFiles.maxFilesPerTrigger": "1"})

    @dp.table(name="few_bytes_a_batch")
    def few_bytes_a_batch():
        return auto_loader("json", "{root}/capped", **{"cloudFiles.maxBytesPerTrigger": "1b"})

    @dp.table(name="new_only")
    def new_only():
        return auto_loader("json", "{root}/new_only",
                           **{"cloudFiles.includeExistingFiles": "false"})

    @dp.table(name="rescued")
    def rescued():
        return auto_loader("json", "{root}/rescued",
                           **{"cloudFiles.schemaEvolutionMode": "rescue"})
"""


def batches(result, flow: str) -> int:
    return next(f.batches for f in result.flows if f.flow == flow)


def test_auto_loader_reads_each_file_once_with_databricks_schemas(spark, settings, tmp_path):
    data, warehouse = tmp_path / "in", tmp_path / "warehouse"
    write_json(data / "events" / "a.json", {"id": 1, "name": "x", "nested": {"n": 2}})
    write_json(data / "typed" / "a.json", {"id": 1, "amount": 2.5},
               {"id": "not a number", "amount": 3.0}, {"id": None, "amount": 4.0})
    (data / "csvs").mkdir()
    (data / "csvs" / "a.csv").write_text("id,amount\n1,2.5\n")
    (data / "csvs" / "notes.txt").write_text("id,amount\nnot,read\n")
    (data / "parquets").mkdir()
    pq.write_table(pa.table({"id": [1, 2], "name": ["p", "q"]}), data / "parquets" / "a.parquet")
    (data / "texts").mkdir()
    (data / "texts" / "a.txt").write_text("hello\nworld\n")
    for n in range(3):
        write_json(data / "capped" / f"{n}.json", {"n": n})
    write_json(data / "new_only" / "old.json", {"n": 0})
    write_json(data / "rescued" / "a.json", {"id": 1})
    root = pipeline(tmp_path, INGEST.replace("{root}", str(data)))

    first = run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    # Without inferColumnTypes, JSON's columns are strings (nested ones too), with the rescued
    # data column; `_metadata` is there to select.
    events = spark.read.format("delta").load(str(warehouse / "events"))
    assert events.schema.simpleString() == (
        "struct<id:string,name:string,nested:struct<n:string>,_rescued_data:string,"
        "file_name:string>")
    assert rows(spark, warehouse, "events") == [("1", "x", ("2",), None, "a.json")]
    # Inferred types, a hint over them; a value that does not fit its type is rescued with its
    # file's path.
    typed = spark.read.format("delta").load(str(warehouse / "typed"))
    assert typed.schema.simpleString() == "struct<amount:double,id:int,_rescued_data:string>"
    rescued = {r.amount: r._rescued_data for r in typed.collect()}
    assert rescued[2.5] is None and rescued[4.0] is None  # a JSON null fits any type
    assert json.loads(rescued[3.0]) == {"id": "not a number",
                                        "_file_path": f"file:{data}/typed/a.json"}
    assert rows(spark, warehouse, "csvs") == [(1, 2.5, None)]  # notes.txt: not *.csv
    assert rows(spark, warehouse, "parquets", "id", "name") == [(1, "p"), (2, "q")]
    assert rows(spark, warehouse, "texts") == [("hello", "a.txt"), ("world", "a.txt")]
    assert batches(first, "one_file_a_batch") == 3
    assert batches(first, "few_bytes_a_batch") == 3
    assert rows(spark, warehouse, "one_file_a_batch", "n") == [("0",), ("1",), ("2",)]
    assert rows(spark, warehouse, "new_only") == []  # existing when the stream first ran
    # The schema inferred is kept at the schema location, under the flow's checkpoint.
    assert list((warehouse / "_pipeline" / "checkpoints" / "typed").rglob("_schemas/*"))

    write_json(data / "events" / "b.json", {"id": 2, "name": "y", "nested": {"n": 3}})
    write_json(data / "new_only" / "new.json", {"n": 1})
    write_json(data / "rescued" / "b.json", {"id": 2, "extra": True})
    write_json(data / "capped" / "3.json", {"n": 3})
    (data / "csvs" / "b.csv").write_text("id,amount\nx,3.0\n")
    second = run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    # Each file read once across updates: the second reads only what is new.
    assert rows(spark, warehouse, "events", "id", "file_name") == [("1", "a.json"),
                                                                   ("2", "b.json")]
    assert batches(second, "one_file_a_batch") == 1
    assert rows(spark, warehouse, "new_only", "n") == [("1",)]
    # A CSV value not of its column's inferred type is rescued, not lost.
    csvs = spark.read.format("delta").load(str(warehouse / "csvs")).orderBy("amount").collect()
    assert [(r[0], r[1], json.loads(r[2]) if r[2] else None) for r in csvs] == [
        (1, 2.5, None), (None, 3.0, {"id": "x", "_file_path": f"file:{data}/csvs/b.csv"})]
    # rescue: the schema never evolves; the new column's value is in _rescued_data.
    assert [json.loads(r[1]) if r[1] else None
            for r in rows(spark, warehouse, "rescued", "id", "_rescued_data")] == [
        None, {"extra": True, "_file_path": f"file:{data}/rescued/b.json"}]


EVOLVING = """
    from pyspark import pipelines as dp

    @dp.table(name="evolving")
    def evolving():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .load("{root}"))
"""


@covers(SchemaEvolvedError)
def test_add_new_columns_stops_once_then_the_next_update_has_them(in_session, settings, tmp_path,
                                                                  capsys, monkeypatch):
    """The stop is `exactly-once run`'s one line, Databricks' UNKNOWN_FIELD_EXCEPTION."""
    spark = in_session
    data, warehouse = tmp_path / "in", tmp_path / "warehouse"
    write_json(data / "a.json", {"id": 1})
    root = pipeline(tmp_path, EVOLVING.replace("{root}", str(data)))
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    write_json(data / "b.json", {"id": 2, "color": "red"})
    dump = tmp_path / "dump.jsonl"  # the run's source, which this pipeline does not read
    dump.write_text(json.dumps({"topic": "orders", "key": "o1", "payload": "{}"}) + "\n")
    code = cli.main(["run", "--quiet", "--pipelines", str(root), "--source", f"file:{dump}",
                     "--warehouse", str(warehouse)])
    err = capsys.readouterr().err
    assert code == 1 and len(err.splitlines()) == 1, err
    assert re.fullmatch(r"exactly-once: error: flow `evolving` failed: \[UNKNOWN_FIELD_EXCEPTION"
                        r"\.NEW_FIELDS_IN_FILE\] .*\[color\].*the next update reads them\n",
                        err), err
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert rows(spark, warehouse, "evolving", "id", "color") == [("1", None), ("2", "red")]
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)  # nothing new: nothing again
    assert rows(spark, warehouse, "evolving", "id", "color") == [("1", None), ("2", "red")]


STRICT = """
    from pyspark import pipelines as dp

    def auto_loader(**options):
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .options(**options))

    @dp.table(name="strict")
    def strict():
        return auto_loader(**{"cloudFiles.schemaEvolutionMode": "failOnNewColumns"}).load(
            "{root}")

    @dp.table(name="fixed")
    def fixed():
        return auto_loader().schema("id STRING").load("{root}")
"""


def test_fail_on_new_columns_stops_until_changed_and_a_given_schema_ignores_them(
        spark, settings, tmp_path):
    """failOnNewColumns: "Stream fails. Stream does not restart unless the provided schema is
    updated, or the offending data file is removed"; with a schema given the mode is none:
    new columns are ignored, and no rescue column unless asked for."""
    from exactly_once.errors import SchemaEvolvedError

    data, warehouse = tmp_path / "in", tmp_path / "warehouse"
    write_json(data / "a.json", {"id": "1"})
    root = pipeline(tmp_path, STRICT.replace("{root}", str(data)))
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    write_json(data / "b.json", {"id": "2", "color": "red"})
    for _ in range(2):
        with pytest.raises(SchemaEvolvedError, match=r"\[color\].*automatic retry: false"):
            run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert rows(spark, warehouse, "strict") == [("1", None)]
    assert rows(spark, warehouse, "fixed") == [("1",), ("2",)]


REFUSED = """
    from pyspark import pipelines as dp

    @dp.table(name="notified")
    def notified():
        return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
                .option("cloudFiles.useNotifications", "true").load("{root}"))
"""


def test_an_option_the_runtime_cannot_honour_is_one_line(in_session, settings, tmp_path,
                                                         capsys):
    data = tmp_path / "in"
    write_json(data / "a.json", {"id": 1})
    root = pipeline(tmp_path, REFUSED.replace("{root}", str(data)))
    expected = (f"{root / 'defs.py'}: dataset `notified`: Auto Loader option "
                "cloudFiles.useNotifications is not supported by the local runtime")
    assert cli.main(["dry-run", "--pipelines", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(ERROR + expected) and len(err.splitlines()) == 1, err
    with pytest.raises(DeclarationError) as raised:
        run_pipeline(in_session, settings, tmp_path / "warehouse", pipelines_dir=root)
    assert str(raised.value).startswith(expected)
    assert not (tmp_path / "warehouse" / "notified").exists()
    # A directory that is not there: one line too.
    (root / "defs.py").write_text((root / "defs.py").read_text().replace(
        '.option("cloudFiles.useNotifications", "true")', "").replace(str(data), "/no/such"))
    assert cli.main(["dry-run", "--pipelines", str(root)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Auto Loader cannot list /no/such" in err, err


def test_read_files_for_sql_batch_and_stream(spark, tmp_path):
    """`read_files` as SQL's table-valued function reads: a batch read infers column types
    (its `inferColumnTypes` defaults to true) and adds `_rescued_data`; a stream is Auto
    Loader's."""
    from exactly_once.local.auto_loader.reader import read_files

    write_json(tmp_path / "in" / "a.json", {"id": 1, "name": "x"})
    batch = read_files(spark, str(tmp_path / "in"), {}, streaming=False)  # format: *.json
    assert batch.schema.simpleString() == "struct<id:bigint,name:string,_rescued_data:string>"
    assert [tuple(r) for r in batch.collect()] == [(1, "x", None)]
    stream = read_files(spark, str(tmp_path / "in"), {
        "format": "json", "schemaLocation": str(tmp_path / "schema")}, streaming=True)
    assert stream.isStreaming
    assert stream.columns == ["id", "name", "_rescued_data"]


def test_dry_run_infers_and_analyzes_writing_nothing(in_session, tmp_path, capsys):
    """dry-run builds the Auto Loader read as an update would (the schema inferred, a column
    the query names checked against it) and records no schema."""
    data = tmp_path / "in"
    write_json(data / "a.json", {"id": 1})
    root = pipeline(tmp_path, EVOLVING.replace("{root}", str(data)) + '''
    @dp.table(name="picked")
    def picked():
        return spark.readStream.table("evolving").select("id", "no_such_column")
    ''')
    assert cli.main(["dry-run", "--pipelines", str(root)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "dataset `picked`" in err[0] and "no_such_column" in err[0], err
    assert not list(tmp_path.rglob("_schemas"))


def test_the_schema_location_on_the_object_store(s3_store, monkeypatch, tmp_path):
    """A warehouse on `s3a://` keeps Auto Loader's schema versions there (the runtime's own
    files go through storage/files.py), and nothing in the working directory."""
    from pyspark.sql.types import StringType, StructField, StructType
    from test_cluster import object_store

    from exactly_once.local.auto_loader import schema_log

    object_store(s3_store, monkeypatch)
    monkeypatch.chdir(tmp_path)
    where = f"s3a://{s3_store.bucket}/auto-loader/_pipeline/checkpoints/f/_auto_loader/0/schema"
    assert schema_log.latest(where) is None
    first = StructType([StructField("id", StringType())])
    schema_log.write_next(where, None, first, frozenset({"s3a://b/in/a.json"}))
    version = schema_log.latest(where)
    assert version is not None and (version.number, version.schema) == (0, first)
    schema_log.write_next(where, version, first.add("color", StringType()),
                          version.files | {"s3a://b/in/b.json"})
    latest = schema_log.latest(where)
    assert latest is not None and latest.number == 1 and len(latest.files) == 2
    assert list(tmp_path.iterdir()) == [], "nothing written in the working directory"
