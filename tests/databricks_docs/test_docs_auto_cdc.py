"""AUTO CDC as Databricks documents it: the CDC page's example feed of users, processed as SCD
type 1 (with and without its TRUNCATE record), SCD type 2 and SCD type 2 without tracking
`city`, each target holding what the page says it holds; the null-update parameters; a one-time
hydration flow (`once`) next to a change flow.

Pages:
- The AUTO CDC APIs, its examples and their results: https://docs.databricks.com/aws/en/ldp/cdc
- create_auto_cdc_flow: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes
- AUTO CDC INTO (SQL), IGNORE NULL UPDATES ON:
  https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-apply-changes-into
- Replicate an external RDBMS table (a once flow, then a change flow):
  https://docs.databricks.com/aws/en/ldp/database-replication
"""

from __future__ import annotations

import pytest
from docs_corpus import dp_file, json_files, ordered, pipeline, refusal, rows, run

CDC = "https://docs.databricks.com/aws/en/ldp/cdc"
AUTO_CDC = "https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes"
AUTO_CDC_SQL = "https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-apply-changes-into"
REPLICATION = "https://docs.databricks.com/aws/en/ldp/database-replication"

USERS = "userId BIGINT, name STRING, city STRING, operation STRING, sequenceNum BIGINT"
# CDC, "Input records for these examples".
FEED = [
    (124, "Raul", "Oaxaca", "INSERT", 1),
    (123, "Isabel", "Monterrey", "INSERT", 1),
    (125, "Mercedes", "Tijuana", "INSERT", 2),
    (126, "Lily", "Cancun", "INSERT", 2),
    (123, None, None, "DELETE", 6),
    (125, "Mercedes", "Guadalajara", "UPDATE", 6),
    (125, "Mercedes", "Mexicali", "UPDATE", 5),
    (123, "Isabel", "Chihuahua", "UPDATE", 5),
]
# "If you uncomment the final row in the example data, it inserts the following record that
# specifies where records should be truncated".
TRUNCATE = (None, None, None, "TRUNCATE", 3)


def records(*feed: tuple) -> list[dict]:
    columns = ("userId", "name", "city", "operation", "sequenceNum")
    return [dict(zip(columns, r, strict=True)) for r in feed]


@pytest.fixture(scope="module")
def users(spark, settings, tmp_path_factory):
    """The CDC page's examples, each kind a pipeline of its own as the page writes them, over
    the feed with and without its TRUNCATE record: one update of the SCD type 1 pipeline
    (`target`, `truncated_target`) and one of the SCD type 2 pipeline (`history`,
    `history_without_city`); the warehouse of each."""
    tmp = tmp_path_factory.mktemp("auto_cdc")
    feed = json_files(tmp / "feed", users=records(*FEED))
    truncating = json_files(tmp / "truncating", users=records(*FEED, TRUNCATE))
    views = f'''
        from pyspark.sql.functions import col, expr

        @dp.temporary_view
        def users():
          return spark.readStream.format("json").schema("{USERS}").load("{feed}")
        '''
    scd1 = pipeline(tmp / "scd1", users=dp_file(views, f'''
        @dp.temporary_view
        def users_with_truncate():
          return spark.readStream.format("json").schema("{USERS}").load("{truncating}")

        dp.create_streaming_table("target")

        dp.create_auto_cdc_flow(
          target = "target",
          source = "users",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          apply_as_truncates = expr("operation = 'TRUNCATE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = 1
        )

        dp.create_streaming_table("truncated_target")

        dp.create_auto_cdc_flow(
          target = "truncated_target",
          source = "users_with_truncate",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          apply_as_truncates = expr("operation = 'TRUNCATE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = 1
        )
        '''))
    scd2 = pipeline(tmp / "scd2", users=dp_file(views, '''
        dp.create_streaming_table("history")

        dp.create_auto_cdc_flow(
          target = "history",
          source = "users",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = "2"
        )

        dp.create_streaming_table("history_without_city")

        dp.create_auto_cdc_flow(
          target = "history_without_city",
          source = "users",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = "2",
          track_history_except_column_list = ["city"]
        )
        '''))
    for root in (scd1, scd2):
        run(spark, settings, root, root.parent / "warehouse")
    return {"scd1": tmp / "scd1" / "warehouse", "scd2": tmp / "scd2" / "warehouse"}


def test_scd_type_1(spark, users):
    """CDC: "After running the SCD type 1 example, the target table contains the following
    records"; Isabel is deleted, Mercedes' late Mexicali update is ignored."""
    assert rows(spark, users["scd1"] / "target", "userId", "name", "city") == [
        (124, "Raul", "Oaxaca"), (125, "Mercedes", "Guadalajara"), (126, "Lily", "Cancun")]


def test_scd_type_1_with_the_truncate_record(spark, users):
    """CDC: "records 124 and 126 are truncated because of the TRUNCATE operation at
    sequenceNum=3, and the target table contains the following record"."""
    assert rows(spark, users["scd1"] / "truncated_target", "userId", "name", "city") == [
        (125, "Mercedes", "Guadalajara")]


def test_scd_type_2(spark, users):
    """CDC: "After running the SCD type 2 example, the target table contains the following
    records"."""
    assert rows(spark, users["scd2"] / "history", "userId", "name", "city", "__START_AT",
                "__END_AT") == ordered([
        (123, "Isabel", "Monterrey", 1, 5),
        (123, "Isabel", "Chihuahua", 5, 6),
        (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Tijuana", 2, 5),
        (125, "Mercedes", "Mexicali", 5, 6),
        (125, "Mercedes", "Guadalajara", 6, None),
        (126, "Lily", "Cancun", 2, None),
    ])


def test_scd_type_2_without_tracking_city(spark, users):
    """CDC: with track_history_except_column_list = ["city"], "the target table contains the
    following records": a change of city updates the version in place."""
    assert rows(spark, users["scd2"] / "history_without_city", "userId", "name", "city",
                "__START_AT", "__END_AT") == [
        (123, "Isabel", "Chihuahua", 1, 6),
        (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Guadalajara", 2, None),
        (126, "Lily", "Cancun", 2, None),
    ]


def test_null_updates_ignored_everywhere_or_on_some_columns(spark, settings, tmp_path):
    """AUTO_CDC: ignore_null_updates, ignore_null_updates_column_list and
    ignore_null_updates_except_column_list; AUTO_CDC_SQL: "IGNORE NULL UPDATES ON columnList:
    only the listed columns retain their existing values when the incoming value is null. All
    other columns apply explicit null values." (and ON * EXCEPT, its complement). An update of
    user 1 with neither name nor city."""
    feed = json_files(tmp_path / "feed", users=[
        {"id": 1, "name": "Ana", "city": "Lisbon", "seq": 1},
        {"id": 1, "name": None, "city": None, "seq": 2}])
    root = pipeline(tmp_path, users=dp_file(f'''
        @dp.temporary_view
        def changes():
          return spark.readStream.format("json").schema(
            "id BIGINT, name STRING, city STRING, seq BIGINT").load("{feed}")

        dp.create_streaming_table("every_column")
        dp.create_auto_cdc_flow(target="every_column", source="changes", keys=["id"],
                                sequence_by="seq", ignore_null_updates=True)

        dp.create_streaming_table("city_only")
        dp.create_auto_cdc_flow(target="city_only", source="changes", keys=["id"],
                                sequence_by="seq", ignore_null_updates_column_list=["city"])

        dp.create_streaming_table("all_but_name")
        dp.create_auto_cdc_flow(target="all_but_name", source="changes", keys=["id"],
                                sequence_by="seq",
                                ignore_null_updates_except_column_list=["name"])
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    held = {t: rows(spark, warehouse / t, "id", "name", "city", "seq")
            for t in ("every_column", "city_only", "all_but_name")}
    assert held == {"every_column": [(1, "Ana", "Lisbon", 2)],
                    "city_only": [(1, None, "Lisbon", 2)],
                    "all_but_name": [(1, None, "Lisbon", 2)]}


def test_a_once_flow_hydrates_the_target_then_the_change_flow_goes_on(spark, settings,
                                                                      tmp_path):
    """REPLICATION, written as the page writes it (`@dp.view()`, `flow_name`): the once flow
    "runs only once to hydrate the table" (AUTO_CDC, once; a snapshot file added later is not
    read), the change flow applies every change as it arrives."""
    orders = "order_id BIGINT, status STRING, timestamp BIGINT"
    snapshot = json_files(tmp_path / "snapshot", a=[
        {"order_id": 1, "status": "open", "timestamp": 1},
        {"order_id": 2, "status": "open", "timestamp": 1}])
    changes = json_files(tmp_path / "changes", a=[
        {"order_id": 2, "status": "shipped", "timestamp": 5}])
    root = pipeline(tmp_path, orders=dp_file(f'''
        @dp.view()
        def full_orders_snapshot():
            return spark.readStream.format("json").schema("{orders}").load("{snapshot}")

        @dp.view()
        def rdbms_orders_change_feed():
            return spark.readStream.format("json").schema("{orders}").load("{changes}")

        dp.create_streaming_table("rdbms_orders")

        dp.create_auto_cdc_flow(
            flow_name = "initial_load_orders",
            once = True,
            target = "rdbms_orders",
            source = "full_orders_snapshot",
            keys = ["order_id"],
            sequence_by = "timestamp",
            stored_as_scd_type = "1"
        )

        dp.create_auto_cdc_flow(
            flow_name = "orders_incremental_cdc",
            target = "rdbms_orders",
            source = "rdbms_orders_change_feed",
            keys = ["order_id"],
            sequence_by = "timestamp",
            stored_as_scd_type = "1"
        )
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    first = rows(spark, warehouse / "rdbms_orders", "order_id", "status")
    json_files(snapshot, b=[{"order_id": 3, "status": "open", "timestamp": 1}])
    json_files(changes, b=[{"order_id": 1, "status": "shipped", "timestamp": 6}])
    run(spark, settings, root, warehouse)
    assert first == [(1, "open"), (2, "shipped")]
    assert rows(spark, warehouse / "rdbms_orders", "order_id", "status") == [
        (1, "shipped"), (2, "shipped")]


# -- refused by Databricks ----------------------------------------------------------------------
def test_truncates_in_scd_type_2_are_one_line(in_session, tmp_path, capsys):
    """AUTO_CDC, apply_as_truncates: "The apply_as_truncates parameter is supported only for SCD
    type 1. SCD type 2 does not support truncate operations."."""
    root = pipeline(tmp_path, users=dp_file('''
        @dp.temporary_view
        def users():
          return spark.readStream.format("rate").load().selectExpr(
            "value AS userId", "'x' AS operation", "value AS sequenceNum")

        dp.create_streaming_table("target")
        dp.create_auto_cdc_flow(target="target", source="users", keys=["userId"],
                                sequence_by="sequenceNum",
                                apply_as_truncates="operation = 'TRUNCATE'",
                                stored_as_scd_type=2)
        '''))
    refusal(root, capsys, "users", "target", ["apply_as_truncates"])
