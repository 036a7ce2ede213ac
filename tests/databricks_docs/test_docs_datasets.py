"""Datasets as Databricks' reference pages declare them: `table`, `materialized_view`,
`temporary_view`, their parameters and declared schemas.

Pages:
- table: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-table
- materialized_view: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-materialized-view
- temporary_view: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-view
- dayofweek (the generated column's values):
  https://docs.databricks.com/aws/en/sql/language-manual/functions/dayofweek
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest
from docs_corpus import delta, detail, dp_file, json_files, pipeline, refusal, rows, run

from exactly_once.local.storage import delta_log

TABLE = "https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-table"
MATERIALIZED_VIEW = "https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-materialized-view"
VIEW = "https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-view"

SALES = "order_id BIGINT, region STRING, amount DOUBLE"
PRIVATE = "docs_corpus_private_staging"  # a name no other test registers


@pytest.fixture(scope="module")
def sales_pipeline(spark, settings, tmp_path_factory):
    """Two updates of a pipeline of every dataset kind over a folder of JSON orders: the second
    update finds one more order. The tables as they are after each update."""
    tmp = tmp_path_factory.mktemp("datasets")
    inbox = json_files(tmp / "inbox", a=[
        {"order_id": 1, "region": "east", "amount": 5.0},
        {"order_id": 2, "region": "west", "amount": 20.0}])
    archive = tmp / "archive"
    root = pipeline(tmp, sales=dp_file(f'''
        @dp.table(
          comment="Raw data on sales",
          table_properties={{"quality": "bronze"}},
          partition_cols=["region"])
        def sales_raw():
          return spark.readStream.format("json").schema("{SALES}").load("{inbox}")

        @dp.temporary_view(comment="Orders over 10")
        def large_orders():
          return spark.readStream.table("sales_raw").where("amount > 10")

        @dp.table
        def large_sales():
          return spark.readStream.table("large_orders")

        # A batch query: @table makes a materialized view of it.
        @dp.table(comment="Sales per region")
        def sales_by_region():
          return (spark.read.table("sales_raw").groupBy("region")
                  .agg(F.sum("amount").alias("amount")))

        @dp.table(path="{archive}")
        def sales_archive():
          return spark.readStream.table("sales_raw")

        @dp.table(name="{PRIVATE}", private=True)
        def staging():
          return spark.readStream.table("sales_raw").select("order_id")

        @dp.materialized_view
        def staged_orders():
          return spark.read.table("{PRIVATE}").groupBy().count()
        '''))
    warehouse = tmp / "warehouse"
    run(spark, settings, root, warehouse)
    first = {"sales_by_region": rows(spark, warehouse / "sales_by_region")}
    json_files(inbox, b=[{"order_id": 3, "region": "east", "amount": 30.0}])
    run(spark, settings, root, warehouse)
    return warehouse, archive, first


def test_a_streaming_table_s_comment_properties_and_partitions_reach_delta(spark,
                                                                           sales_pipeline):
    """TABLE: comment, table_properties and partition_cols are the Delta table's description,
    properties and partition columns; a streaming table reads each new order once."""
    warehouse, _, _ = sales_pipeline
    sales_raw = detail(spark, warehouse / "sales_raw")
    assert sales_raw["description"] == "Raw data on sales"
    assert sales_raw["partitionColumns"] == ["region"]
    assert sales_raw["properties"].get("quality") == "bronze"
    assert rows(spark, warehouse / "sales_raw", "order_id") == [(1,), (2,), (3,)]


def test_a_temporary_view_is_computed_when_read_and_not_stored(spark, sales_pipeline):
    """VIEW: a view's results are calculated when queried; it is no table of its own."""
    warehouse, _, _ = sales_pipeline
    assert rows(spark, warehouse / "large_sales", "order_id") == [(2,), (3,)]
    assert not (warehouse / "large_orders").exists()


def test_a_batch_query_in_table_makes_a_materialized_view(spark, sales_pipeline):
    """TABLE: "The @table operator in the pyspark.pipelines module still works in this way"
    (streaming tables and materialized views): over a batch read it is a materialized view,
    recomputed from every order at each update."""
    warehouse, _, first = sales_pipeline
    assert first["sales_by_region"] == [("east", 5.0), ("west", 20.0)]
    assert rows(spark, warehouse / "sales_by_region") == [("east", 35.0), ("west", 20.0)]
    assert detail(spark, warehouse / "sales_by_region")["description"] == "Sales per region"


def test_path_is_where_the_table_s_data_is_stored(spark, sales_pipeline):
    """TABLE: path, "A storage location for table data"."""
    _, archive, _ = sales_pipeline
    assert rows(spark, archive, "order_id") == [(1,), (2,), (3,)]


def test_a_private_table_feeds_the_pipeline_but_is_not_published(spark, sales_pipeline):
    """TABLE: private, "Create a table, but do not publish the table to the metastore. That
    table is available to the pipeline but is not accessible outside the pipeline"."""
    warehouse, _, _ = sales_pipeline
    assert rows(spark, warehouse / "staged_orders") == [(3,)]
    assert not spark.catalog.tableExists(PRIVATE)


@pytest.fixture(scope="module")
def schema_pipeline(spark, settings, tmp_path_factory):
    """One update of the reference pages' declared-schema examples, and of two materialized
    views that differ only in `spark_conf`. The session's time zone before the update."""
    tmp = tmp_path_factory.mktemp("schemas")
    orders = "customer_id STRING, customer_name STRING, number_of_line_items STRING, " \
             "order_datetime STRING, order_number LONG"
    inbox = json_files(tmp / "inbox", a=[
        {"customer_id": "c1", "customer_name": "Ana", "number_of_line_items": "2",
         "order_datetime": "2024-01-01 10:00:00", "order_number": 1},  # a Monday
        {"customer_id": "c2", "customer_name": "Bo", "number_of_line_items": "1",
         "order_datetime": "2024-01-06 09:00:00", "order_number": 2}])  # a Saturday
    root = pipeline(tmp, schemas=dp_file(f'''
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        # Specify a schema with SQL DDL, use a generated column, and set clustering columns
        @dp.table(
          comment="Raw data on sales",
          schema="""
            customer_id STRING,
            customer_name STRING,
            number_of_line_items STRING,
            order_datetime STRING,
            order_number LONG,
            order_day_of_week INT GENERATED ALWAYS AS (dayofweek(order_datetime))
            """,
          cluster_by = ["order_day_of_week", "customer_id"])
        def sales():
          return spark.readStream.format("json").schema("{orders}").load("{inbox}")

        sales_schema = StructType([
          StructField("customer_id", StringType(), True),
          StructField("customer_name", StringType(), True),
          StructField("number_of_line_items", StringType(), True),
          StructField("order_datetime", StringType(), True),
          StructField("order_number", LongType(), True)]
        )

        @dp.materialized_view(
          comment="Raw data on sales",
          schema=sales_schema)
        def sales_copy():
          return spark.read.table("sales").drop("order_day_of_week")

        @dp.materialized_view(
          schema="""
            id int COMMENT 'This is the customer ID',
            name string COMMENT 'This is the customer full name',
            region string
            """,
          cluster_by_auto=True,
          cluster_by=["region"])
        def customers():
          return spark.createDataFrame([(1, "Ana", "US"), (2, "Bo", "EU")],
                                       "id int, name string, region string")

        def hours():
          return spark.range(1).select(
            F.hour(F.timestamp_seconds(F.lit(0))).alias("hour"),
            F.current_timezone().alias("zone"))

        @dp.materialized_view(spark_conf={{"spark.sql.session.timeZone": "Asia/Tokyo"}})
        def tokyo_hours():
          return hours()

        @dp.materialized_view
        def pipeline_hours():
          return hours()
        '''))
    zone = spark.conf.get("spark.sql.session.timeZone")
    warehouse = tmp / "warehouse"
    run(spark, settings, root, warehouse)
    return warehouse, zone


def test_a_ddl_schema_with_a_generated_column_and_clustering(spark, schema_pipeline):
    """TABLE, "Specify a schema with SQL DDL, use a generated column, and set clustering
    columns" (with the column INT, dayofweek's type: the page's STRING is refused below): the
    table has the declared columns, the generated one computed by Delta
    (dayofweek: 1 = Sunday, 2 = Monday, ..., 7 = Saturday), and is clustered by the two."""
    warehouse, _ = schema_pipeline
    table = delta(spark, warehouse / "sales")
    assert table.columns == ["customer_id", "customer_name", "number_of_line_items",
                             "order_datetime", "order_number", "order_day_of_week"]
    assert table.schema["order_day_of_week"].dataType.simpleString() == "int"
    # Delta keeps a generation expression in its log's schema (a read's schema leaves it out).
    logged = json.loads(delta_log._latest_metadata(warehouse / "sales")["schemaString"])
    assert [f["metadata"].get("delta.generationExpression") for f in logged["fields"]
            if f["name"] == "order_day_of_week"] == ["dayofweek(order_datetime)"]
    assert rows(spark, warehouse / "sales", "customer_id", "order_day_of_week") == [
        ("c1", 2), ("c2", 7)]
    sales = detail(spark, warehouse / "sales")
    assert sales["clusteringColumns"] == ["order_day_of_week", "customer_id"]
    assert sales["description"] == "Raw data on sales"


def test_a_struct_type_schema_is_the_table_s_schema(spark, schema_pipeline):
    """MATERIALIZED_VIEW: schema as a Python StructType (the reference's `sales_schema`)."""
    warehouse, _ = schema_pipeline
    table = delta(spark, warehouse / "sales_copy")
    assert [(f.name, f.dataType.simpleString()) for f in table.schema] == [
        ("customer_id", "string"), ("customer_name", "string"),
        ("number_of_line_items", "string"), ("order_datetime", "string"),
        ("order_number", "bigint")]
    assert rows(spark, warehouse / "sales_copy", "order_number") == [(1,), (2,)]


def test_column_comments_and_automatic_clustering_with_initial_keys(spark, schema_pipeline):
    """TABLE (the row filter example's schema, without its filter and mask): a column's COMMENT
    is its comment; MATERIALIZED_VIEW: cluster_by_auto "can be combined with cluster_by to
    define the columns to use as the initial clustering keys"."""
    warehouse, _ = schema_pipeline
    schema = delta(spark, warehouse / "customers").schema
    assert {f.name: f.metadata.get("comment") for f in schema} == {
        "id": "This is the customer ID", "name": "This is the customer full name",
        "region": None}
    assert detail(spark, warehouse / "customers")["clusteringColumns"] == ["region"]


def test_spark_conf_is_set_for_its_own_query_only(spark, schema_pipeline):
    """MATERIALIZED_VIEW: spark_conf, "A list of Spark configurations for the execution of this
    query": Tokyo's hour of the epoch for the view that sets it, the pipeline's for the other,
    and the session's own setting untouched."""
    warehouse, zone = schema_pipeline
    epoch = datetime.fromtimestamp(0, timezone.utc)
    assert rows(spark, warehouse / "tokyo_hours") == [(9, "Asia/Tokyo")]
    assert rows(spark, warehouse / "pipeline_hours") == [
        (epoch.astimezone(ZoneInfo(zone)).hour, zone)]
    assert spark.conf.get("spark.sql.session.timeZone") == zone


# -- refused ------------------------------------------------------------------------------------
ROW_FILTER = dp_file('''
    @dp.table(
       schema="""
        id int COMMENT 'This is the customer ID',
        name string COMMENT 'This is the customer full name',
        region string
        """,
      row_filter = "ROW FILTER catalog.schema.us_filter_fn ON (region, name)")
    def sales():
       return spark.range(1).selectExpr("CAST(id AS INT) AS id", "'Ana' AS name", "'US' AS region")
    ''')
COLUMN_MASK = dp_file('''
    @dp.table(
       schema="""
        id int,
        region string,
        ssn string MASK catalog.schema.ssn_mask_fn USING COLUMNS (region)
        """)
    def sales():
       return spark.range(1).selectExpr("CAST(id AS INT) AS id", "'US' AS region", "'1' AS ssn")
    ''')
# The page's own DDL: a STRING column generated by dayofweek, an INT. Open-source Delta creates a
# generated column only of its expression's type (DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH), so
# the runtime refuses it at load, before any data moves, with the fix.
GENERATED_TYPE = dp_file('''
    @dp.table(schema="""
        order_datetime STRING,
        order_day_of_week STRING GENERATED ALWAYS AS (dayofweek(order_datetime))
        """)
    def sales():
       return spark.range(1).selectExpr("'2024-01-01 10:00:00' AS order_datetime")
    ''')
UNFIT_QUERY = dp_file('''
    @dp.materialized_view(schema="id BIGINT, name STRING")
    def sales():
       return spark.range(3).selectExpr("id", "id * 2 AS amount")
    ''')


@pytest.mark.parametrize("text, words", [
    # Unity Catalog functions: row filters and column masks need them (TABLE, "Specify a row
    # filter and column mask"); the local runtime has none, so it refuses them.
    pytest.param(ROW_FILTER, ["row_filter"], id="a row filter"),
    pytest.param(COLUMN_MASK, ["mask"], id="a column mask"),
    # A declared schema is the table's: a query that does not fit it is an error.
    pytest.param(UNFIT_QUERY, ["schema"], id="a query that does not fit its schema"),
    pytest.param(GENERATED_TYPE, ["generated column `order_day_of_week` is STRING", "INT"],
                 id="a generated column of another type than its expression"),
])
def test_what_a_dataset_cannot_declare_locally_is_one_line(in_session, tmp_path, capsys, text,
                                                           words):
    root = pipeline(tmp_path, sales=text)
    refusal(root, capsys, "sales", "sales", words)
