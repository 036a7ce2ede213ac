"""Pipeline SQL files (`.sql` in the pipeline folder), run locally as Databricks runs them.

Each pipeline here is written from Databricks' pages, and what the tables must hold is derived
from what those pages say:

  CREATE STREAMING TABLE   https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-streaming-table
  CREATE MATERIALIZED VIEW https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-materialized-view
  CREATE TEMPORARY VIEW    https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-temporary-view
  CREATE VIEW              https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-view
  CREATE FLOW              https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-flow
  AUTO CDC INTO            https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-apply-changes-into
  CONSTRAINT ... EXPECT    https://docs.databricks.com/aws/en/ldp/expectations
  ${key} parameters        https://docs.databricks.com/aws/en/ldp/parameters
  the statements            https://docs.databricks.com/aws/en/ldp/developer/sql-ref
  SET (a flow's Spark conf) as open-source Spark Declarative Pipelines apply it

One update of one pipeline (Python and SQL files reading each other) carries most checks, in the
session every test shares; what the runtime refuses is a dry-run line each.
"""

from __future__ import annotations

import json
from textwrap import dedent

import pytest
from test_cli_dry_run import dry_run

from exactly_once import cli
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.paths import pipeline_files


def write_pipeline(tmp_path, **files: str):
    """`name_sql=...` writes name.sql, `name_py=...` name.py."""
    root = tmp_path / "pipelines"
    root.mkdir()
    for key, text in files.items():
        name, _, suffix = key.rpartition("_")
        (root / f"{name}.{suffix}").write_text(dedent(text).lstrip("\n"))
    return root


def rows(spark, path, order: str = "id") -> list[tuple]:
    return [tuple(r) for r in spark.read.format("delta").load(str(path)).orderBy(order).collect()]


def detail(spark, path) -> dict:
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    return {"comment": row.description, "properties": dict(row.properties),
            "partitions": list(row.partitionColumns), "clustering": list(row.clusteringColumns)}


# Sources in Python: an order feed with one row lacking an id, a change feed of customers, a
# batch seed; SQL reads them and Python reads SQL back (`doubled`).
SOURCES_PY = '''
from pyspark import pipelines as dp
from pyspark.sql import functions as F

@dp.table
def raw_orders():
    return spark.readStream.format("delta").load({orders!r})

@dp.table
def customer_changes():
    return spark.readStream.format("delta").load({changes!r})

@dp.materialized_view
def seed_ids():
    return spark.createDataFrame([(100,), (101,)], "id BIGINT")

@dp.materialized_view
def doubled():
    return spark.read.table("order_totals").select((F.col("orders") * 2).alias("twice"))
'''

# https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-streaming-table: a table
# specification with a column comment and a generated column, an expectation that drops rows,
# COMMENT, TBLPROPERTIES, PARTITIONED BY; STREAM(...) reads the source as a stream.
ORDERS_SQL = '''
-- orders, cleaned
CREATE OR REFRESH STREAMING TABLE orders_clean (
  id BIGINT COMMENT 'the order',
  amount INT,
  big BOOLEAN GENERATED ALWAYS AS (amount > 10),
  CONSTRAINT has_id EXPECT (id IS NOT NULL) ON VIOLATION DROP ROW
)
COMMENT 'Orders with an id.'
TBLPROPERTIES ('quality' = 'silver')
PARTITIONED BY (big)
AS SELECT id, amount FROM STREAM(raw_orders);

/* https://docs.databricks.com/aws/en/ldp/parameters: ${min_amount} is the configuration's */
CREATE OR REFRESH MATERIALIZED VIEW order_totals
COMMENT 'Orders of at least the minimum amount.'
CLUSTER BY (orders)
AS SELECT count(*) AS orders, sum(amount) AS total
   FROM orders_clean WHERE amount >= ${min_amount};

CREATE TEMPORARY VIEW big_orders AS SELECT id, amount FROM STREAM orders_clean WHERE big;

CREATE OR REFRESH STREAMING TABLE big_order_ids AS SELECT id FROM STREAM(LIVE.big_orders);

-- https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-flow: two flows append
-- to one table, the second ONCE (a backfill: a batch query, run once).
CREATE OR REFRESH STREAMING TABLE all_ids;
CREATE FLOW live_ids COMMENT 'the feed' AS INSERT INTO all_ids BY NAME
  SELECT id FROM STREAM(orders_clean);
CREATE FLOW backfill_ids AS INSERT INTO ONCE all_ids BY NAME SELECT id FROM seed_ids;
-- The page's newer spelling puts ONCE before INTO (INSERT [ONCE] INTO).
CREATE FLOW backfill_more_ids AS INSERT ONCE INTO all_ids BY NAME
  SELECT id + 100 AS id FROM seed_ids;

-- https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-view: a view, published,
-- which the pipeline reads too.
CREATE VIEW large_orders COMMENT 'Orders over 10.' TBLPROPERTIES ('quality' = 'gold')
AS SELECT id, amount FROM LIVE.orders_clean WHERE amount > 10;
CREATE OR REFRESH MATERIALIZED VIEW large_order_count AS SELECT count(*) AS n FROM large_orders;

SET spark.sql.session.timeZone = Asia/Tokyo;
CREATE OR REFRESH MATERIALIZED VIEW tokyo_hour AS
  SELECT hour(TIMESTAMP '2025-01-01 00:00:00 UTC') AS hour, count(*) AS seeds FROM seed_ids;
'''

# https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-apply-changes-into: SCD1 by
# CREATE FLOW ... AS AUTO CDC INTO, SCD2 by the older APPLY CHANGES INTO.
CUSTOMERS_SQL = '''
-- The project's rule: an SCD1 table over the changes an SCD2 table keeps keeps its tombstones.
CREATE OR REFRESH STREAMING TABLE customers
TBLPROPERTIES ('pipelines.cdc.tombstoneGCThresholdInSeconds' = '3153600000');

CREATE FLOW customers_cdc COMMENT 'Each customer as they are now.' AS AUTO CDC INTO customers
FROM STREAM(customer_changes)
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq)
STORED AS SCD TYPE 1;

CREATE OR REFRESH STREAMING TABLE customers_history;

APPLY CHANGES INTO customers_history
FROM STREAM customer_changes
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq)
STORED AS SCD TYPE 2
TRACK HISTORY ON * EXCEPT (city);

-- https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-flow: AUTO CDC ONCE, a
-- one-time flow whose source is read as a batch (a hydration).
CREATE OR REFRESH STREAMING TABLE customers_hydrated;

CREATE FLOW hydrate_customers AS AUTO CDC ONCE INTO customers_hydrated
FROM customer_changes
KEYS (id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq)
STORED AS SCD TYPE 1;
'''

# https://docs.databricks.com/aws/en/sql/language-manual/functions/read_files: a batch read of
# JSON files (Auto Loader's read_files, auto_loader/reader.py).
FILES_SQL = '''
CREATE OR REFRESH MATERIALIZED VIEW landed AS
  SELECT name FROM read_files('{landing}', format => 'json');

CREATE OR REFRESH MATERIALIZED VIEW initials AS
  SELECT substr(name, 1, 1) AS initial, count(*) AS names FROM landed GROUP BY 1 ORDER BY 1;
'''



@pytest.fixture(scope="module")
def sql_run(spark, settings, tmp_path_factory):
    root = tmp_path_factory.mktemp("sql")
    orders, changes, landing = root / "orders", root / "changes", root / "landing"
    spark.createDataFrame([(1, 5), (2, 20), (None, 7), (3, 30)], "id BIGINT, amount INT") \
        .write.format("delta").save(str(orders))
    spark.createDataFrame(
        [(1, "Oslo", 1, "UPSERT"), (2, "Rome", 1, "UPSERT"), (1, "Bergen", 2, "UPSERT"),
         (2, None, 2, "DELETE"), (1, "Bergen", 3, "UPSERT")],
        "id BIGINT, city STRING, seq INT, op STRING").write.format("delta").save(str(changes))
    landing.mkdir()
    (landing / "a.json").write_text('{"name": "ada"}\n{"name": "bob"}\n')
    files = write_pipeline(root, sources_py=SOURCES_PY.format(orders=str(orders),
                                                               changes=str(changes)),
                           orders_sql=ORDERS_SQL, customers_sql=CUSTOMERS_SQL,
                           files_sql=FILES_SQL.format(landing=str(landing)))
    warehouse = root / "warehouse"
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=files,
                          configuration={"min_amount": "6"})
    return files, warehouse, result


def test_sql_files_are_pipeline_files_sorted_with_the_python_ones(tmp_path):
    root = write_pipeline(tmp_path, b_sql="SELECT 1;", a_py="", c_py="")
    assert [p.name for p in pipeline_files(root)] == ["a.py", "b.sql", "c.py"]


def test_streaming_table_with_its_clauses_and_expectation(spark, sql_run):
    _, warehouse, _ = sql_run
    # The row without an id is dropped (ON VIOLATION DROP ROW); `big` is generated.
    assert rows(spark, warehouse / "orders_clean") == [(1, 5, False), (2, 20, True),
                                                       (3, 30, True)]
    table = detail(spark, warehouse / "orders_clean")
    assert (table["comment"], table["properties"]["quality"], table["partitions"]) == (
        "Orders with an id.", "silver", ["big"])
    schema = spark.read.format("delta").load(str(warehouse / "orders_clean")).schema
    assert schema["id"].metadata.get("comment") == "the order"


def test_materialized_view_with_a_parameter_read_back_by_python(spark, sql_run):
    _, warehouse, _ = sql_run
    # amount >= 6 (the configuration's min_amount): 20 and 30.
    assert rows(spark, warehouse / "order_totals", "orders") == [(2, 50)]
    assert detail(spark, warehouse / "order_totals")["comment"] == \
        "Orders of at least the minimum amount."
    assert detail(spark, warehouse / "order_totals")["clustering"] == ["orders"]
    assert rows(spark, warehouse / "doubled", "twice") == [(4,)]


def test_temporary_view_read_as_a_stream_with_the_live_prefix(spark, sql_run):
    _, warehouse, _ = sql_run
    assert rows(spark, warehouse / "big_order_ids") == [(2,), (3,)]
    assert not (warehouse / "big_orders").exists()


def test_flows_insert_by_name_and_once(spark, sql_run):
    _, warehouse, _ = sql_run
    assert rows(spark, warehouse / "all_ids") == [(1,), (2,), (3,), (100,), (101,), (200,),
                                                  (201,)]


def test_set_gives_the_following_flows_their_spark_conf(spark, sql_run):
    _, warehouse, _ = sql_run
    # Its read of a pipeline dataset is made in the flow's own session (a clone with the SET).
    assert rows(spark, warehouse / "tokyo_hour", "hour") == [(9, 2)]
    assert spark.conf.get("spark.sql.session.timeZone") != "Asia/Tokyo"


def test_auto_cdc_into_scd1_and_apply_changes_into_scd2(spark, sql_run):
    _, warehouse, _ = sql_run
    # SCD1: the newest change per key; customer 2's delete removes it; op and seq left out.
    assert rows(spark, warehouse / "customers") == [(1, "Bergen")]
    # SCD2 with history tracked on every column but city: customer 1's moves change only city,
    # which updates its one version in place; customer 2's version ends at its delete (seq 2).
    history = spark.read.format("delta").load(str(warehouse / "customers_history"))
    assert {f.name for f in history.schema.fields} == {"id", "city", "__START_AT", "__END_AT"}
    assert sorted((r["id"], r["city"], r["__START_AT"], r["__END_AT"])
                  for r in history.collect()) == [(1, "Bergen", 1, None), (2, "Rome", 1, 2)]


def test_auto_cdc_once_into_applies_a_batch_read_of_its_source(spark, sql_run):
    _, warehouse, _ = sql_run
    # Every change of the source, read as a batch, applied as SCD1 (customers' rows).
    assert rows(spark, warehouse / "customers_hydrated") == [(1, "Bergen")]


def test_once_stands_before_or_after_into(spark, tmp_path):
    """Loaded only: `INSERT INTO ONCE` (the page's older spelling), `INSERT ONCE INTO` and
    `AUTO CDC ONCE INTO` declare once flows, as `once=True` does in Python."""
    from exactly_once.local.graph.loader import load_graph

    root = write_pipeline(tmp_path, p_sql="""
        CREATE OR REFRESH MATERIALIZED VIEW seed AS SELECT 1 AS id, 1 AS seq;
        CREATE OR REFRESH STREAMING TABLE ids;
        CREATE FLOW older AS INSERT INTO ONCE ids BY NAME SELECT id FROM seed;
        CREATE FLOW newer AS INSERT ONCE INTO ids BY NAME SELECT id FROM seed;
        CREATE OR REFRESH STREAMING TABLE current;
        CREATE FLOW hydrate AS AUTO CDC ONCE INTO current FROM LIVE.seed KEYS (id)
          SEQUENCE BY seq;
        """)
    graph = load_graph(spark, [root / "p.sql"])
    assert {(flow.name, flow.once) for flow in graph.flows_into("ids")} == {
        ("older", True), ("newer", True)}
    (hydrate,) = graph.auto_cdc_flows
    assert (hydrate.name, hydrate.source, hydrate.once) == ("hydrate", "seed", True)


def test_read_files_reads_the_files(spark, sql_run):
    _, warehouse, _ = sql_run
    assert rows(spark, warehouse / "landed", "name") == [("ada",), ("bob",)]
    assert rows(spark, warehouse / "initials", "initial") == [("a", 1), ("b", 1)]


def test_graph_shows_sql_datasets_with_file_and_line(in_session, sql_run, capsys):
    files, _, _ = sql_run
    assert cli.main(["graph", "--pipelines", str(files), "--format", "json",
                     "--conf", "min_amount=6"]) == 0
    graph = json.loads(capsys.readouterr().out)
    where = {d["name"]: (d["kind"], d["file"]) for d in graph["datasets"]}
    sql = str(files / "orders.sql")
    assert where["orders_clean"] == ("streaming table", f"{sql}:2")
    assert where["order_totals"] == ("materialized view", f"{sql}:14")
    assert where["big_orders"] == ("temporary view", f"{sql}:20")
    assert where["raw_orders"][1] == str(files / "sources.py")
    flows = {f["name"]: f for f in graph["flows"]}
    assert flows["backfill_ids"]["kind"] == "append once"
    assert flows["live_ids"]["comment"] == "the feed"
    assert flows["customers_cdc"]["kind"] == "AUTO CDC SCD1"
    assert flows["customers_cdc"]["comment"] == "Each customer as they are now."
    assert flows["hydrate_customers"]["kind"] == "AUTO CDC SCD1 once"
    assert flows["backfill_more_ids"]["kind"] == "append once"
    assert [r["dataset"] for r in flows["doubled"]["reads"]] == ["order_totals"]
    assert {(r["dataset"], r["streaming"]) for r in flows["order_totals"]["reads"]} == {
        ("orders_clean", False)}


# What the runtime refuses, before any data moves: one line naming the file, the line and the
# statement. (sql, the line, what the message says after the statement)
REFUSED = {
    # Databricks documents sinks in Python only (dp.create_sink).
    "create_sink": ("CREATE TEMPORARY VIEW v AS SELECT 1 AS x;\n"
                    "CREATE SINK s USING delta OPTIONS (path '/tmp/s');", 2,
                    "`CREATE SINK s USING delta OPTIONS ...`: CREATE SINK is not pipeline SQL "
                    "Databricks documents; declare a sink with dp.create_sink in Python"),
    # A view is published: it reads no stream ("Views cannot have streaming queries"), and
    # no expectations ("CONSTRAINT clause form of expectations are not supported").
    "view_of_a_stream": ("CREATE VIEW v AS SELECT * FROM STREAM(s);", 1,
                         "dataset `v`: `CREATE VIEW v AS SELECT * ...`: a CREATE VIEW reads "
                         "tables and views (Databricks: \"views cannot have streaming "
                         "queries\"); a view over read_files is not supported by the local "
                         "runtime, declare a materialized view"),
    "view_with_an_expectation": ("CREATE VIEW v (CONSTRAINT c EXPECT (x > 0)) AS SELECT 1 AS x;",
                                 1, "`CREATE VIEW v (CONSTRAINT c EXPECT ...`: a CREATE "
                                 "VIEW has no CONSTRAINT ... EXPECT (Databricks: expectations "
                                 "are not supported on views)"),
    "legacy_live": ("CREATE OR REFRESH STREAMING LIVE TABLE t AS SELECT * FROM STREAM(s);", 1,
                    "`CREATE OR REFRESH STREAMING LIVE TABLE ...`: the older LIVE syntax is "
                    "not supported by the local runtime; write CREATE OR REFRESH STREAMING "
                    "TABLE, MATERIALIZED VIEW or CREATE TEMPORARY VIEW"),
    # USE CATALOG / USE SCHEMA are read (test_your_bundle); other forms are not.
    "use_identifier": ("-- a comment\n/* another */\nUSE SCHEMA IDENTIFIER('other');", 3,
                       "`USE SCHEMA IDENTIFIER('other')`: the local runtime reads USE CATALOG "
                       "name and USE [SCHEMA] [catalog.]schema, each name as written (not "
                       "IDENTIFIER(...) or a string)"),
    # Databricks' newer (Beta) clause of a streaming table's own flow: named, with what to write.
    "flow_clause": ("CREATE OR REFRESH STREAMING TABLE t\nFLOW AUTO CDC FROM STREAM(s) KEYS (id) "
                    "SEQUENCE BY seq;", 1,
                    "`CREATE OR REFRESH STREAMING TABLE t ...`: a streaming table's FLOW clause "
                    "(Beta) is not supported by the local runtime; declare the table, then its "
                    "flow: CREATE FLOW t AS INSERT INTO t BY NAME ... or AUTO CDC INTO t ..."),
    "missing_parameter": ("CREATE MATERIALIZED VIEW m AS\nSELECT ${nowhere.key} AS x;", 1,
                          "`CREATE MATERIALIZED VIEW m AS SELECT ...`: ${nowhere.key} is not "
                          "set in the pipeline configuration"),
    "syntax": ("-- a comment\nCREATE OR REFRESH MATERIALIZED VIEW m AS\nSELECT (1 AS x;", 2,
               "`CREATE OR REFRESH MATERIALIZED VIEW m ...`: does not parse: "
               "[PARSE_SYNTAX_ERROR] Syntax error at or near end of input. SQLSTATE: 42601 "
               "(line 3, pos 14)"),
    "insert_not_by_name": ("CREATE FLOW f AS INSERT INTO t SELECT * FROM STREAM(s);", 1,
                           "`CREATE FLOW f AS INSERT INTO ...`: a flow inserts BY NAME "
                           "(INSERT INTO t BY NAME query)"),
    "auto_cdc_from_a_batch": ("CREATE FLOW f AS AUTO CDC INTO t "
                              "FROM s KEYS (id) SEQUENCE BY seq;", 1,
                              "`CREATE FLOW f AS AUTO CDC ...`: AUTO CDC reads a "
                              "stream: FROM STREAM(s) (a one-time flow that reads a batch is "
                              "AUTO CDC ONCE INTO)"),
    # What needs Unity Catalog or predictive optimization, in the words the Python API's
    # refusals use (dataset_declarations.py).
    "cluster_by_auto": ("CREATE OR REFRESH MATERIALIZED VIEW m CLUSTER BY AUTO AS SELECT 1 AS x;",
                        1, "`CREATE OR REFRESH MATERIALIZED VIEW m ...`: CLUSTER BY AUTO: "
                        "automatic key selection is Databricks' predictive optimization, which "
                        "the local runtime does not have; give the keys with CLUSTER BY "
                        "(columns)"),
    "column_mask": ("CREATE OR REFRESH MATERIALIZED VIEW m (x INT MASK hide_x) AS SELECT 1 AS x;",
                    1, "`CREATE OR REFRESH MATERIALIZED VIEW m ...`: column masks (MASK) need "
                    "Unity Catalog functions, which the local runtime does not have"),
    # A query's own column named mask still reaches Spark's parser, and its own error.
    "mask_in_the_query": ("CREATE OR REFRESH MATERIALIZED VIEW m (x INT) AS SELECT (mask FROM t;",
                          1, "`CREATE OR REFRESH MATERIALIZED VIEW m ...`: does not parse: "
                          "[PARSE_SYNTAX_ERROR] Syntax error at or near 'FROM'. SQLSTATE: 42601 "
                          "(line 1, pos 62)"),
    "primary_key": ("CREATE OR REFRESH MATERIALIZED VIEW m (x INT NOT NULL, CONSTRAINT m_pk "
                    "PRIMARY KEY (x)) AS SELECT 1 AS x;", 1,
                    "`CREATE OR REFRESH MATERIALIZED VIEW m ...`: PRIMARY KEY and FOREIGN KEY "
                    "constraints are Unity Catalog's, which the local runtime does not have"),
    "auto_cdc_once_from_a_stream": ("CREATE FLOW f AS AUTO CDC ONCE INTO t FROM STREAM(s) "
                                    "KEYS (id) SEQUENCE BY seq;", 1,
                                    "`CREATE FLOW f AS AUTO CDC ...`: AUTO CDC ONCE reads its "
                                    "source once, as a batch: FROM s, not STREAM"),
    "auto_cdc_unsupported_clause": ("CREATE FLOW f AS AUTO CDC INTO t FROM STREAM(s) "
                                    "KEYS (id) SEQUENCE BY seq SYSTEM SEQUENCE BY ts;", 1,
                                    "`CREATE FLOW f AS AUTO CDC ...`: SYSTEM SEQUENCE "
                                    "BY is not supported by the local runtime"),
    "temporary_view_columns": ("CREATE TEMPORARY VIEW v (a COMMENT 'x') AS SELECT 1 AS a;", 1,
                               "dataset `v`: `CREATE TEMPORARY VIEW v (a COMMENT ...`: a column "
                               "list on a temporary view is not supported by the local runtime"),
    "row_filter": ("CREATE OR REFRESH STREAMING TABLE t WITH ROW FILTER f ON (id)\n"
                   "AS SELECT * FROM STREAM(s);", 1,
                   "`CREATE OR REFRESH STREAMING TABLE t ...`: WITH ROW FILTER needs a "
                   "Unity Catalog function, which the local runtime does not have"),
}


@pytest.mark.parametrize("sql, line, message", [pytest.param(*case, id=name)
                                                for name, case in REFUSED.items()])
def test_dry_run_refuses_in_one_line_naming_file_line_and_statement(in_session, tmp_path,
                                                                    capsys, sql, line, message):
    root = write_pipeline(tmp_path, p_sql=sql)
    code, errors, _ = dry_run(root, capsys)
    assert code == 1
    assert errors == [f"{root / 'p.sql'}:{line}: {message}"]


def test_a_view_is_published_over_the_tables_it_reads(spark, sql_run):
    """CREATE VIEW: the pipeline reads it (large_order_count) and it is published, with its
    comment and properties, over the tables as the update left them."""
    _, warehouse, _ = sql_run
    assert rows(spark, warehouse / "large_order_count", "n") == [(2,)]
    assert sorted(tuple(r) for r in spark.table("large_orders").collect()) == [(2, 20), (3, 30)]
    described = {r.col_name: r.data_type for r in
                 spark.sql("DESCRIBE TABLE EXTENDED large_orders").collect()}
    assert described["Comment"] == "Orders over 10."
    assert "quality=gold" in described["Table Properties"]
    assert not (warehouse / "large_orders").exists()  # a view holds no data


def test_a_view_reads_only_what_is_published(in_session, tmp_path, capsys):
    root = write_pipeline(tmp_path, p_sql="""
        CREATE TEMPORARY VIEW t AS SELECT 1 AS x;
        CREATE VIEW v AS SELECT x FROM t;
        """)
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [f"{root / 'p.sql'}:2: dataset `v`: view `v` reads `t`, which "
                                  "the pipeline does not publish (a temporary view or a private "
                                  "table): a view is published, and reads what is"])


def test_a_mistake_of_a_sql_dataset_names_its_file_line_and_dataset(in_session, tmp_path,
                                                                   capsys):
    # The same check as a Python declaration's (dataset_declarations.py), located in the file.
    root = write_pipeline(tmp_path, p_sql="""
        CREATE OR REFRESH MATERIALIZED VIEW ok AS SELECT 1 AS x;

        CREATE OR REFRESH MATERIALIZED VIEW m TBLPROPERTIES ('comment' = 'x') AS SELECT 1 AS x;
        """)
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [f"{root / 'p.sql'}:3: dataset `m`: materialized_view: "
                                  "table_properties: `comment` is reserved: Spark sets it"])


def test_statements_register_what_the_python_api_registers(spark, tmp_path):
    """Loaded only: each statement's declaration, as the Python API's, located at its line."""
    from exactly_once.local.graph.expectations import DROP, FAIL, WARN, Expectation
    from exactly_once.local.graph.loader import load_graph

    root = write_pipeline(tmp_path, p_sql="""
        CREATE OR REFRESH PRIVATE STREAMING TABLE t (
          CONSTRAINT warned EXPECT (id > 0),
          CONSTRAINT dropped EXPECT (id < 10) ON VIOLATION DROP ROW,
          CONSTRAINT failed EXPECT (id <> 5) ON VIOLATION FAIL UPDATE
        ) LOCATION '/tmp/somewhere/t';

        CREATE FLOW f COMMENT 'the backfill' AS INSERT INTO ONCE t BY NAME
        WITH q AS (SELECT 1 AS id) SELECT id FROM q;

        CREATE OR REFRESH PRIVATE MATERIALIZED VIEW m AS SELECT id FROM t;
        """)
    graph = load_graph(spark, [root / "p.sql"])
    table = graph.outputs["t"]
    assert table.expectations == (Expectation("warned", "id > 0", WARN),
                                  Expectation("dropped", "id < 10", DROP),
                                  Expectation("failed", "id <> 5", FAIL))
    assert (table.path, table.source_code_location.filename,
            table.source_code_location.line_number) == ("/tmp/somewhere/t", str(root / "p.sql"), 1)
    assert table.private  # CREATE PRIVATE STREAMING TABLE: not published
    (flow,) = graph.flows_into("t")
    assert (flow.name, flow.once, flow.comment, flow.source_code_location.line_number) == (
        "f", True, "the backfill", 7)
    assert graph.outputs["m"].private and graph.declared_in["m"] == f"{root / 'p.sql'}:10"


def test_a_query_of_the_wrong_kind_is_refused_by_dry_run(in_session, tmp_path, capsys):
    # "If the ONCE option is not provided, the query must be a streaming query" (create flow;
    # a streaming table's query likewise); a materialized view reads batches.
    root = write_pipeline(tmp_path, src_py="""
        from pyspark import pipelines as dp

        @dp.materialized_view
        def base():
            return spark.createDataFrame([(1,)], "id INT")
        """, p_sql="""
        CREATE OR REFRESH STREAMING TABLE from_a_batch AS SELECT * FROM base;

        CREATE OR REFRESH MATERIALIZED VIEW of_a_stream AS SELECT * FROM STREAM(base);
        """)
    code, errors, _ = dry_run(root, capsys)
    sql = root / "p.sql"
    assert (code, set(errors)) == (1, {
        f"{sql}:1: dataset `from_a_batch`: `from_a_batch` is written by a streaming query: read "
        "its sources with STREAM(name) (a flow that reads a batch is INSERT INTO ONCE)",
        f"{sql}:3: dataset `of_a_stream`: materialized view `of_a_stream` reads batches: FROM "
        "name, not STREAM(name)"})


def test_auto_cdc_clauses_are_create_auto_cdc_flow_s_arguments(spark, tmp_path):
    """Loaded only: every clause of AUTO CDC INTO
    (https://docs.databricks.com/aws/dlt-ref/dlt-sql-ref-apply-changes-into, and IGNORE NULL
    UPDATES ON of https://docs.databricks.com/aws/en/sql/language-manual/sql-ref-syntax-ddl-create-streaming-table-auto-cdc)
    as the argument create_auto_cdc_flow takes."""
    from exactly_once.local.graph.loader import load_graph

    root = write_pipeline(tmp_path, p_sql="""
        CREATE TEMPORARY VIEW changes AS
          SELECT * FROM STREAM(LIVE.feed);
        CREATE OR REFRESH STREAMING TABLE feed AS
          SELECT id, name, seq, op FROM STREAM(outside_the_pipeline);
        CREATE OR REFRESH STREAMING TABLE current
          TBLPROPERTIES ('pipelines.cdc.tombstoneGCThresholdInSeconds' = '3153600000');
        CREATE OR REFRESH STREAMING TABLE history;

        CREATE FLOW to_current AS AUTO CDC INTO current FROM STREAM(changes) KEYS (id)
          IGNORE NULL UPDATES APPLY AS DELETE WHEN op = 'D' APPLY AS TRUNCATE WHEN op = 'T'
          SEQUENCE BY seq COLUMNS id, name STORED AS SCD TYPE 1;
        CREATE FLOW to_history AS AUTO CDC INTO history FROM STREAM changes KEYS (id)
          IGNORE NULL UPDATES ON * EXCEPT (name) SEQUENCE BY struct(seq, op)
          COLUMNS * EXCEPT (op) STORED AS SCD TYPE 2 TRACK HISTORY ON (name);
        """)
    graph = load_graph(spark, [root / "p.sql"])
    current, history = graph.auto_cdc_flows
    assert (current.name, current.target, current.source, current.keys) == (
        "to_current", "current", "changes", ("id",))
    assert (current.ignore_null_updates, str(current.apply_as_deletes),
            str(current.apply_as_truncates), str(current.sequence_by), current.column_list,
            current.stored_as_scd_type) == (
        True, "Column<'op = 'D''>", "Column<'op = 'T''>", "Column<'seq'>", ("id", "name"), 1)
    assert (history.ignore_null_updates_except_column_list, str(history.sequence_by),
            history.except_column_list, history.stored_as_scd_type,
            history.track_history_column_list) == (
        ("name",), "Column<'struct(seq, op)'>", ("op",), 2, ("name",))


def test_auto_cdc_into_takes_quoted_names_as_the_python_api_does(spark, tmp_path):
    """KEYS, COLUMNS and TRACK HISTORY ON name a column whose name has a dot or a backtick in
    backticks, the backtick doubled: the column's whole name, as `F.col` reads it."""
    from exactly_once.local.graph.loader import load_graph

    root = write_pipeline(tmp_path, p_sql="""
        CREATE OR REFRESH STREAMING TABLE feed AS
          SELECT * FROM STREAM(outside_the_pipeline);
        CREATE OR REFRESH STREAMING TABLE history;

        CREATE FLOW to_history AS AUTO CDC INTO history FROM STREAM(feed)
          KEYS (`order.id`, `a``b`) SEQUENCE BY seq COLUMNS * EXCEPT (`op.code`)
          STORED AS SCD TYPE 2 TRACK HISTORY ON (`amount.usd`, plain);
        """)
    (history,) = load_graph(spark, [root / "p.sql"]).auto_cdc_flows
    assert (history.keys, history.except_column_list, history.track_history_column_list) == (
        ("order.id", "a`b"), ("op.code",), ("amount.usd", "plain"))
