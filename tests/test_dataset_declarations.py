"""Datasets declared as Databricks documents them: every argument of `dp.table`,
`dp.materialized_view`, `dp.temporary_view` and `dp.create_streaming_table` reaches the Delta
table (`DESCRIBE DETAIL`, `SHOW TBLPROPERTIES`, the columns' metadata), or is refused by
`dry-run` and `run` in one line naming the file, the dataset and the argument.

The reference pages:
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-table
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-materialized-view
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-view
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-streaming-table
  https://docs.databricks.com/aws/en/ldp/expectations (expectations on every dataset kind)

Each pipeline is a folder of tiny files in tmp_path, run in the shared session.
"""

from __future__ import annotations

import json
from textwrap import dedent

import pytest
from test_cli_dry_run import ERROR, dry_run

from exactly_once import cli
from exactly_once.errors import DeclarationError, FlowError
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.graph.loader import load_graph
from exactly_once.local.observe import event_log
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.paths import pipeline_files

HEADER = """
from pyspark import pipelines as dp
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType
"""
ORDERS = "id BIGINT, region STRING, order_date DATE, amount BIGINT"
# 2026-11-23 is a Monday (dayofweek 2), 2026-11-28 a Saturday (dayofweek 7).
FIRST = [{"id": 1, "region": "eu", "order_date": "2026-11-23", "amount": 10},
         {"id": 2, "region": "us", "order_date": "2026-11-28", "amount": 5},
         {"id": 3, "region": "eu", "order_date": "2026-11-28", "amount": 7}]
MORE = [{"id": 4, "region": "us", "order_date": "2026-11-23", "amount": 1}]


def source(tmp_path, name: str, rows: list[dict]) -> str:
    folder = tmp_path / "input"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text("\n".join(json.dumps(r) for r in rows))
    return str(folder)


def pipeline(tmp_path, body: str, **values: object):
    """One pipeline file `p.py` in tmp_path/pipelines (rewritten if there), `values` its
    globals."""
    root = tmp_path / "pipelines"
    root.mkdir(exist_ok=True)
    constants = "".join(f"{k} = {v!r}\n" for k, v in values.items())
    (root / "p.py").write_text(HEADER + constants + dedent(body))
    return root


def detail(spark, path) -> dict:
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().asDict()
    return {key: row[key] for key in ("description", "partitionColumns", "clusteringColumns",
                                      "properties", "location")}


def tblproperties(spark, path) -> dict[str, str]:
    return {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}


def stored_columns(path) -> dict[str, dict]:
    """Each column as the table's Delta log holds it: type, nullability, metadata."""
    schema = json.loads(delta_log._latest_metadata(path)["schemaString"])
    return {f["name"]: {"type": f["type"], "nullable": f["nullable"], **f["metadata"]}
            for f in schema["fields"]}


TABLES = """
@dp.table(name="orders", comment=COMMENT, table_properties={"quality": "bronze"},
          partition_cols=["region"], spark_conf={"spark.sql.shuffle.partitions": "3"},
          path=ORDERS_PATH)
def orders():
    return spark.readStream.schema(ORDERS).json(SOURCE)

@dp.table(name="typed_orders", cluster_by=[TYPED_CLUSTER], schema='''
    id BIGINT NOT NULL COMMENT 'the order',
    region STRING,
    order_date DATE,
    order_day_of_week INT GENERATED ALWAYS AS (dayofweek(order_date)),
    amount BIGINT''')
def typed_orders():
    return spark.readStream.table("orders")

@dp.materialized_view(
    name="totals", comment="Amount per region.",
    table_properties={"quality": "gold", "delta.checkpointInterval": "7"},
    partition_cols=TOTALS_PARTITIONS,
    schema=StructType([StructField("region", StringType(), metadata={"comment": "where"}),
                       StructField("amount", LongType())]))
def totals():
    return spark.read.table("typed_orders").groupBy("region").agg(F.sum("amount").alias("amount"))

@dp.materialized_view(name="days", cluster_by=["order_day_of_week"], refresh_policy="full")
def days():
    return spark.read.table("typed_orders").groupBy("order_day_of_week").count()
"""


def test_every_option_reaches_delta_and_a_recompute_keeps_it(spark, settings, tmp_path,
                                                              in_session, capsys):
    """Comment, properties, partitioning, clustering, path, a DDL schema (NOT NULL, a column
    comment, a generated column) and a StructType schema, on streaming tables and materialized
    views; a second update (materialized views recomputed; in the file, `orders`' comment and
    properties, `typed_orders`' clustering and `totals`' partitioning changed) keeps the
    definitions and brings the changes to Delta."""
    orders_path = tmp_path / "elsewhere" / "orders"
    values = {"SOURCE": source(tmp_path, "first", FIRST), "ORDERS": ORDERS,
              "ORDERS_PATH": str(orders_path), "COMMENT": "Raw orders.", "TYPED_CLUSTER": "id"}
    root = pipeline(tmp_path, TABLES.replace("TOTALS_PARTITIONS", '["region"]'), **values)
    warehouse = tmp_path / "wh"
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)

    # `path`: the table lives there, not in the warehouse; the catalog name points there.
    assert not (warehouse / "orders").exists()
    assert detail(spark, orders_path) == {
        "description": "Raw orders.", "partitionColumns": ["region"], "clusteringColumns": [],
        "properties": {"quality": "bronze", "delta.checkpointInterval": "50"},
        "location": f"file:{orders_path}"}
    assert spark.table("orders").count() == 3
    # spark_conf: on the flow, for the session that runs it (pyspark's Flow.spark_conf).
    graph = load_graph(spark, pipeline_files(root))
    assert {f.name: dict(f.spark_conf) for f in graph.flows}["orders"] == {
        "spark.sql.shuffle.partitions": "3"}

    typed = warehouse / "typed_orders"
    assert detail(spark, typed)["clusteringColumns"] == ["id"]
    columns = stored_columns(typed)
    assert columns["id"] == {"type": "long", "nullable": False, "comment": "the order"}
    assert columns["order_day_of_week"] == {
        "type": "integer", "nullable": True,
        "delta.generationExpression": "dayofweek(order_date)"}
    assert sorted((r.id, r.order_day_of_week) for r in spark.table("typed_orders").collect()) \
        == [(1, 2), (2, 7), (3, 7)]

    def views_hold(totals: dict[str, int], days: dict[int, int], partitions: list[str]) -> None:
        assert detail(spark, warehouse / "totals") | {"location": None} == {
            "description": "Amount per region.", "partitionColumns": partitions,
            "clusteringColumns": [], "location": None,
            # the declaration's checkpoint interval, not the session's default
            "properties": {"quality": "gold", "delta.checkpointInterval": "7"}}
        assert stored_columns(warehouse / "totals")["region"]["comment"] == "where"
        assert {r.region: r.amount for r in spark.table("totals").collect()} == totals
        assert detail(spark, warehouse / "days")["clusteringColumns"] == ["order_day_of_week"]
        assert {r.order_day_of_week: r["count"] for r in spark.table("days").collect()} == days

    views_hold({"eu": 17, "us": 5}, {2: 1, 7: 2}, ["region"])

    source(tmp_path, "more", MORE)
    edited = TABLES.replace('{"quality": "bronze"}', '{"quality": "silver", "team": "ops"}')
    root = pipeline(tmp_path, edited.replace("TOTALS_PARTITIONS", "None"),
                    **values | {"COMMENT": "Orders as they arrive.", "TYPED_CLUSTER": "region"})
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    views_hold({"eu": 17, "us": 6}, {2: 2, 7: 2}, [])
    assert detail(spark, typed)["clusteringColumns"] == ["region"]
    assert detail(spark, orders_path)["description"] == "Orders as they arrive."
    properties = tblproperties(spark, orders_path)
    assert (properties["quality"], properties["team"]) == ("silver", "ops")
    # `show` finds a table where its declaration's path put it.
    assert cli.main(["show", "orders", "--warehouse", str(warehouse)]) == 0
    assert capsys.readouterr().out.startswith("orders: 4 rows")


def test_a_streaming_table_s_partitioning_changes_with_a_full_refresh_only(spark, settings,
                                                                         tmp_path):
    body = """
        @dp.table(name="orders", partition_cols=PARTITIONS)
        def orders():
            return spark.readStream.schema(ORDERS).json(SOURCE)
        """
    values = {"SOURCE": source(tmp_path, "first", FIRST), "ORDERS": ORDERS}
    warehouse = tmp_path / "wh"
    run_pipeline(spark, settings, warehouse,
                 pipelines_dir=pipeline(tmp_path, body, **values, PARTITIONS=["region"]))
    root = pipeline(tmp_path, body, **values, PARTITIONS=["order_date"])
    with pytest.raises(DeclarationError) as err:
        run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert str(err.value) == (
        f"{root / 'p.py'}: dataset `orders`: it is stored partitioned by ['region'] but "
        "declares partition_cols ['order_date']; a full refresh of `orders` (--full-refresh "
        "orders) recreates it")
    run_pipeline(spark, settings, warehouse, pipelines_dir=root, full_refresh=["orders"])
    assert detail(spark, warehouse / "orders")["partitionColumns"] == ["order_date"]
    assert spark.table("orders").count() == 3

    # A table whose declaration moves it elsewhere, its data left where it was.
    moved = tmp_path / "elsewhere"
    root = pipeline(tmp_path, body.replace("partition_cols=PARTITIONS", "path=MOVED"),
                    **values, MOVED=str(moved))
    with pytest.raises(DeclarationError) as err:
        run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert str(err.value) == (
        f"{root / 'p.py'}: dataset `orders`: `orders` is stored at {warehouse / 'orders'}, but "
        f"its declaration's path is now {moved}: move the table there (or remove it) and run "
        "again")


def test_spark_conf_is_the_flow_s(spark, tmp_path):
    """A dataset's `spark_conf` is its flow's (pyspark's `Flow.spark_conf`: the session that
    runs the flow honours it); a streaming table's is every flow's into it, under the flow's
    own."""
    root = pipeline(tmp_path, """
        dp.create_streaming_table("merged", spark_conf={"a": "table", "b": "table"})

        @dp.append_flow(target="merged", spark_conf={"b": "flow"})
        def merged_a():
            return spark.readStream.format("rate").load()

        @dp.temporary_view(name="v", spark_conf={"c": "view"})
        def v():
            return spark.range(1)

        @dp.materialized_view(name="mv", spark_conf={"d": "mv"})
        def mv():
            return spark.read.table("v")
        """)
    graph = load_graph(spark, pipeline_files(root))
    assert {f.name: dict(f.spark_conf) for f in graph.flows} == {
        "merged_a": {"a": "table", "b": "flow"}, "v": {"c": "view"}, "mv": {"d": "mv"}}


def test_a_private_table_is_read_by_the_pipeline_and_not_published(spark, settings, tmp_path,
                                                                    in_session, capsys):
    """`private=True` (`@dp.table`, `create_streaming_table`): not in the session catalog
    (locally, what publishing means); the pipeline reads it, and `show` previews it as any
    table of the warehouse."""
    root = pipeline(tmp_path, """
        @dp.table(name="staging", private=True)
        def staging():
            return spark.readStream.schema(ORDERS).json(SOURCE)

        dp.create_streaming_table("landing", private=True)

        @dp.append_flow(target="landing")
        def land():
            return spark.readStream.table("staging")

        @dp.materialized_view(name="published")
        def published():
            return spark.read.table("landing").groupBy().count()
        """, SOURCE=source(tmp_path, "first", FIRST), ORDERS=ORDERS)
    warehouse = tmp_path / "wh"
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert not spark.catalog.tableExists("staging")
    assert not spark.catalog.tableExists("landing")
    assert spark.table("published").first()["count"] == 3
    assert cli.main(["show", "staging", "--warehouse", str(warehouse)]) == 0
    assert capsys.readouterr().out.startswith("staging: 3 rows (Delta version 1)")


def test_a_batch_query_in_dp_table_makes_a_materialized_view(spark, settings, tmp_path,
                                                            in_session, capsys):
    """Databricks' `table` reference: a batch query makes a materialized view (OSS refuses
    it), recomputed in full at each update; `graph` shows its kind."""
    root = pipeline(tmp_path, """
        @dp.table(name="order_count", comment="How many orders.")
        def order_count():
            return spark.read.schema(ORDERS).json(SOURCE).groupBy().count()
        """, SOURCE=source(tmp_path, "first", FIRST), ORDERS=ORDERS)
    warehouse = tmp_path / "wh"
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert [(f.flow, f.kind) for f in result.flows] == [("order_count", "materialized_view")]
    source(tmp_path, "more", MORE)
    run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    assert [r["count"] for r in spark.table("order_count").collect()] == [4]  # not appended
    assert detail(spark, warehouse / "order_count")["description"] == "How many orders."

    assert cli.main(["graph", "--pipelines", str(root), "--format", "json"]) == 0
    graph = json.loads(capsys.readouterr().out)
    assert [(d["name"], d["kind"]) for d in graph["datasets"]] == [
        ("order_count", "materialized view")]
    assert [(f["name"], f["kind"]) for f in graph["flows"]] == [
        ("order_count", "materialized view")]


ROWS = [{"id": 1, "v": 5}, {"id": 2, "v": -1}, {"id": None, "v": 3}, {"id": 4, "v": None}]
EVERY_KIND = """
@dp.temporary_view(name="checked")
@dp.expect("view_positive", "v > 0")
def checked():
    return spark.readStream.schema("id BIGINT, v BIGINT").json(SOURCE)

@dp.table(name="streamed")
@dp.expect_or_drop("streamed_id", "id IS NOT NULL")
def streamed():
    return spark.readStream.table("checked")

@dp.table(name="batch")
@dp.expect_all({"batch_small": "v < 5"})
def batch():
    return spark.read.schema("id BIGINT, v BIGINT").json(SOURCE)

@dp.materialized_view(name="mv")
@dp.expect_all_or_drop({"mv_id": "id IS NOT NULL"})
def mv():
    return spark.read.schema("id BIGINT, v BIGINT").json(SOURCE)

dp.create_streaming_table("merged", expect_all_or_drop={"merged_id": "id IS NOT NULL"},
                          expect_all={"merged_positive": "v > 0"})

@dp.append_flow(target="merged", name="merged_a")
@dp.expect("a_positive", "v > 0")
def merged_a():
    return spark.readStream.schema("id BIGINT, v BIGINT").json(SOURCE)

@dp.append_flow(target="merged", name="merged_b")
def merged_b():
    return spark.readStream.schema("id BIGINT, v BIGINT").json(SOURCE)
"""


def test_every_expectation_decorator_on_every_dataset_kind(spark, settings, tmp_path):
    """A view's expectations counted by the flow that reads it; `table` over a stream and over
    a batch read, `materialized_view`, `append_flow`; `create_streaming_table(expect_all*)`
    applied to every flow into the table, after the flow's own. NULL fails a constraint."""
    root = pipeline(tmp_path, EVERY_KIND, SOURCE=source(tmp_path, "rows", ROWS))
    warehouse = tmp_path / "wh"
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=root)
    counted = {f.flow: ([(m.name, m.dataset, m.passed_records, m.failed_records)
                         for m in f.expectations], f.dropped_records, f.output_rows)
               for f in result.flows}
    assert counted == {
        "streamed": ([("view_positive", "checked", 2, 2), ("streamed_id", "streamed", 3, 1)],
                     1, 3),
        "batch": ([("batch_small", "batch", 2, 2)], 0, 4),
        "mv": ([("mv_id", "mv", 3, 1)], 1, 3),
        # The flow's own, then the table's: expect_all, expect_all_or_drop, expect_all_or_fail.
        "merged_a": ([("a_positive", "merged", 2, 2), ("merged_positive", "merged", 2, 2),
                      ("merged_id", "merged", 3, 1)], 1, 3),
        "merged_b": ([("merged_positive", "merged", 2, 2), ("merged_id", "merged", 3, 1)],
                     1, 3),
    }
    assert spark.table("merged").where("id IS NULL").count() == 0
    assert spark.table("merged").count() == 6
    logged = (event_log.read(spark, Warehouse(warehouse))
              .selectExpr("origin.flow_name AS flow",
                          "explode(details.flow_progress.data_quality.expectations) AS e")
              .where("flow = 'merged_b'").selectExpr("e.name", "e.failed_records").collect())
    assert sorted(tuple(r) for r in logged) == [("merged_id", 1), ("merged_positive", 2)]


def test_expect_all_or_fail_of_a_streaming_table_stops_each_flow_into_it(spark, settings,
                                                                         tmp_path):
    root = pipeline(tmp_path, """
        dp.create_streaming_table("merged", expect_all_or_fail={"has_id": "id IS NOT NULL"})

        @dp.append_flow(target="merged")
        def rows():
            return spark.readStream.schema("id BIGINT, v BIGINT").json(SOURCE)
        """, SOURCE=source(tmp_path, "rows", ROWS))
    with pytest.raises(FlowError) as err:
        run_pipeline(spark, settings, tmp_path / "wh", pipelines_dir=root)
    assert str(err.value) == ('flow `rows` failed: expectation `has_id` on dataset `merged` '
                              'failed for record: {"v":3}')
    assert spark.read.format("delta").load(str(tmp_path / "wh" / "merged")).count() == 0


def test_a_null_in_a_not_null_column_fails_the_flow_in_one_line(spark, settings, tmp_path):
    root = pipeline(tmp_path, """
        @dp.table(name="keyed", schema="id BIGINT NOT NULL, v BIGINT")
        def keyed():
            return spark.readStream.schema("id BIGINT, v BIGINT").json(SOURCE)
        """, SOURCE=source(tmp_path, "rows", ROWS))
    with pytest.raises(FlowError) as err:
        run_pipeline(spark, settings, tmp_path / "wh", pipelines_dir=root)
    assert str(err.value) == ("flow `keyed` failed: [DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT "
                              "NULL constraint violated for column: id.")


# -- refused, in one line, by dry-run and run ------------------------------------------------------
STREAM = 'spark.readStream.format("rate").load().selectExpr("value AS id", "timestamp AS ts")'


def table(arguments: str, query: str = STREAM, decorator: str = "dp.table") -> str:
    return f"""
        @{decorator}(name="t", {arguments})
        def t():
            return {query}
        """


def auto_cdc_target(arguments: str) -> str:
    return f"""
        @dp.table(name="changes")
        def changes():
            return {STREAM}

        dp.create_streaming_table("t", {arguments})
        dp.create_auto_cdc_flow(target="t", source="changes", keys=["id"], sequence_by="ts",
                                name="cdc")
        """


REFUSED = {
    "automatic clustering without initial keys": (
        table("cluster_by_auto=True"),
        "table: cluster_by_auto=True without cluster_by: automatic key selection is Databricks' "
        "predictive optimization, which the local runtime does not have; give the initial keys "
        "with cluster_by"),
    "another format": (  # pyspark's own argument; Databricks' tables are Delta's
        table('format="parquet"'),
        "table: format parquet: a pipeline's tables are Delta tables"),
    "a row filter": (
        table('row_filter="ROW FILTER f ON (id)"'),
        "table: row_filter needs a Unity Catalog function, which the local runtime does not "
        "have"),
    "a column mask": (
        table('schema="id BIGINT MASK m, ts TIMESTAMP"'),
        "table: schema: column masks (MASK) need Unity Catalog functions, which the local "
        "runtime does not have"),
    "a primary key": (
        table('schema="id BIGINT, ts TIMESTAMP, CONSTRAINT pk PRIMARY KEY (id)"'),
        "table: schema: PRIMARY KEY and FOREIGN KEY constraints are Unity Catalog's, which the "
        "local runtime does not have"),
    "a check constraint": (
        table('schema="id BIGINT, ts TIMESTAMP, CONSTRAINT c CHECK (id > 0)"'),
        "table: schema: CHECK constraints are not supported by the local runtime; declare the "
        "rule as an expectation (dp.expect_or_fail)"),
    "an identity column that is not BIGINT": (
        table('schema="id INT GENERATED ALWAYS AS IDENTITY, ts TIMESTAMP"'),
        "table: schema: identity column `id` is INT: Delta's identity columns are BIGINT"),
    "a value for an ALWAYS identity column": (
        table('schema="id BIGINT GENERATED ALWAYS AS IDENTITY, ts TIMESTAMP"'),
        "its query does not fit its declared schema: column `id` is GENERATED ALWAYS AS "
        "IDENTITY: Delta gives its values, the query may not"),
    "a default": (
        table('schema="id BIGINT DEFAULT 0, ts TIMESTAMP"'),
        "table: schema: column defaults (DEFAULT) are not supported by the local runtime"),
    "a schema that does not parse": (
        table('schema="id BIGINT,"'),
        "table: schema does not parse: [PARSE_SYNTAX_ERROR] Syntax error at or near end of "
        "input. SQLSTATE: 42601 (line 1, pos 10)"),
    "a schema of no kind": (
        table("schema=42"),
        "table: schema must be a DDL string or a StructType, got int"),
    "partitions and clustering": (
        table('partition_cols=["id"], cluster_by=["id"]'),
        "table: give partition_cols or cluster_by, not both"),
    "a partition column the schema lacks": (
        table('schema="id BIGINT, ts TIMESTAMP", partition_cols=["day"]'),
        "table: partition_cols names `day`, which its schema lacks"),
    "a relative path": (
        table('path="tables/t"'),
        "table: path must be an absolute location (a directory or an s3a:// URI), got "
        "'tables/t'"),
    "properties of no kind": (
        table('table_properties=["a"]'),
        "table: table_properties must be a dict, got list"),
    "a property Spark reserves": (
        table('table_properties={"owner": "ops"}'),
        "table: table_properties: `owner` is reserved: Spark sets it"),
    "an incremental refresh policy": (
        table('refresh_policy="incremental"', "spark.range(1)", "dp.materialized_view"),
        "materialized_view: refresh_policy='incremental' is not supported by the local "
        "runtime, which recomputes a materialized view in full; use 'auto' or 'full'"),
    "a refresh policy of no kind": (
        table('refresh_policy="sometimes"', "spark.range(1)", "dp.materialized_view"),
        "materialized_view: refresh_policy must be one of 'auto', 'incremental', "
        "'incremental_strict', 'full'; got 'sometimes'"),
    "a streaming table's expectations on an AUTO CDC target": (
        auto_cdc_target('expect_all={"has_id": "id IS NOT NULL"}'),
        "create_streaming_table: expect_all* on the target of AUTO CDC flow `cdc` are not "
        "supported by the local runtime"),
    "a declared schema on an AUTO CDC target": (
        auto_cdc_target('schema="id BIGINT, ts TIMESTAMP"'),
        "create_streaming_table: a declared schema on the target of AUTO CDC flow `cdc` is not "
        "supported by the local runtime"),
    "a batch @dp.table with an append flow": (
        table('comment="batch"', "spark.range(1)") + f"""
        @dp.append_flow(target="t")
        def more():
            return {STREAM}
        """,
        "`t`'s query is a batch read, which makes it a materialized view (Databricks' "
        "@dp.table); `more` also write(s) it, and a materialized view has no flow but its own "
        "query"),
    # -- a query that does not fit its declared schema -------------------------------------------
    "a query column the schema lacks": (
        table('schema="id BIGINT"'),
        "its query does not fit its declared schema: column `ts` is not in the schema"),
    "a column of another type": (
        table('schema="id INT, ts TIMESTAMP"'),
        "its query does not fit its declared schema: column `id` is bigint in the query, int "
        "in the schema"),
    "a schema column the query lacks": (
        table('schema="id BIGINT, ts TIMESTAMP, name STRING"'),
        "its query does not fit its declared schema: column `name` of the schema is not in the "
        "query"),
}


@pytest.mark.parametrize("body, message",
                         [pytest.param(*case, id=name) for name, case in REFUSED.items()])
def test_dry_run_refuses_in_one_line(in_session, tmp_path, capsys, body, message):
    root = pipeline(tmp_path, body)
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [f"{root / 'p.py'}: dataset `t`: {message}"])


def cli_run(root, tmp_path, capsys, monkeypatch) -> tuple[int, str, list[str]]:
    """`exactly-once run` of the pipeline files in `root`: its exit code, its one error line,
    and the Delta tables it wrote (an update that started records its failure in the event
    log)."""
    warehouse = tmp_path / "warehouse"
    dump = tmp_path / "dump.jsonl"
    dump.write_text(json.dumps({"topic": "orders", "key": "o1", "payload": "{}"}) + "\n")
    code = cli.main(["run", "--quiet", "--pipelines", str(root), "--source", f"file:{dump}",
                     "--warehouse", str(warehouse)])
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(ERROR), out + err
    written = sorted(p.parent.name for p in warehouse.rglob("_delta_log"))
    return code, err.removeprefix(ERROR).rstrip("\n"), written


@pytest.mark.parametrize("case, written", [("automatic clustering without initial keys", []),
                                           ("a column of another type", ["event_log"]),
                                           ("a batch @dp.table with an append flow",
                                            ["event_log"])])
def test_run_refuses_with_the_same_line_and_writes_nothing(in_session, tmp_path, capsys,
                                                           monkeypatch, case, written):
    body, message = REFUSED[case]
    root = pipeline(tmp_path, body)
    assert cli_run(root, tmp_path, capsys, monkeypatch) == (
        1, f"{root / 'p.py'}: dataset `t`: {message}", written)


def test_declaration_errors_are_declaration_errors(spark, tmp_path):
    """The stand-ins raise the runtime's own error, not pyspark's type errors."""
    root = pipeline(tmp_path, table("cluster_by_auto=True"))
    with pytest.raises(DeclarationError, match="dataset `t`: table: cluster_by_auto"):
        load_graph(spark, pipeline_files(root))
