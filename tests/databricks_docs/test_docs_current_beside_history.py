"""Current state beside history: one change feed into two AUTO CDC targets of one pipeline, SCD
type 1 (the current row per key) and SCD type 2 (every version), each holding what the CDC
page's examples say, and SCD type 1's tombstones expiring after
`pipelines.cdc.tombstoneGCThresholdInSeconds` as Databricks expires them: a late event older
than a delete, arriving after the key's tombstone expired, re-creates the key in the current
table, while the history keeps the delete. Databricks runs such a pipeline; `dry-run` runs it
too and warns, in one line naming the table and the setting, that the current table depends on
when the pipeline runs.

Pages:
- The AUTO CDC APIs, the example feed, SCD type 1 and type 2 results, deletes kept as
  tombstones: https://docs.databricks.com/aws/en/ldp/cdc
- create_auto_cdc_flow: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes
- Pipeline properties (`pipelines.cdc.tombstoneGCThresholdInSeconds`):
  https://docs.databricks.com/aws/en/ldp/properties
"""

from __future__ import annotations

from docs_corpus import dp_file, json_files, ordered, pipeline, rows, run
from test_docs_auto_cdc import FEED, USERS, records

from exactly_once import cli

CDC = "https://docs.databricks.com/aws/en/ldp/cdc"
GC = "pipelines.cdc.tombstoneGCThresholdInSeconds"


def test_current_state_beside_history_over_one_feed(spark, settings, tmp_path, in_session,
                                                    capsys):
    """CDC's feed into `target` (SCD type 1, tombstones expiring at once) and `target_history`
    (SCD type 2) of one pipeline: the page's two results. Then a replay of Isabel's update at
    sequence 5, older than her delete at 6: the current table applies it as new (her
    tombstone has expired), the history, which keeps every delete, is unchanged."""
    feed = tmp_path / "feed"
    json_files(feed, first=records(*FEED))
    root = pipeline(tmp_path, users=dp_file(f'''
        from pyspark.sql.functions import col, expr

        @dp.temporary_view
        def users():
          return spark.readStream.format("json").schema("{USERS}").load("{feed}")

        dp.create_streaming_table("target", table_properties={{"{GC}": "0"}})

        dp.create_auto_cdc_flow(
          target = "target",
          source = "users",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = 1
        )

        dp.create_streaming_table("target_history")

        dp.create_auto_cdc_flow(
          target = "target_history",
          source = "users",
          keys = ["userId"],
          sequence_by = col("sequenceNum"),
          apply_as_deletes = expr("operation = 'DELETE'"),
          except_column_list = ["operation", "sequenceNum"],
          stored_as_scd_type = "2"
        )
        '''))
    code = cli.main(["dry-run", "--pipelines", str(root)])
    out, err = capsys.readouterr()
    warnings = err.splitlines()
    assert code == 0, out + err
    assert len(warnings) == 1 and warnings[0].startswith(
        f"exactly-once: warning: {root / 'users.py'}: dataset `target`: "), err
    assert GC in warnings[0] and "after 0 s" in warnings[0], warnings[0]

    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    current = [(124, "Raul", "Oaxaca"), (125, "Mercedes", "Guadalajara"), (126, "Lily", "Cancun")]
    history = ordered([
        (123, "Isabel", "Monterrey", 1, 5),
        (123, "Isabel", "Chihuahua", 5, 6),
        (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Tijuana", 2, 5),
        (125, "Mercedes", "Mexicali", 5, 6),
        (125, "Mercedes", "Guadalajara", 6, None),
        (126, "Lily", "Cancun", 2, None),
    ])
    assert rows(spark, warehouse / "target", "userId", "name", "city") == current
    assert rows(spark, warehouse / "target_history", "userId", "name", "city", "__START_AT",
                "__END_AT") == history

    json_files(feed, late=records((123, "Isabel", "Chihuahua", "UPDATE", 5)))
    run(spark, settings, root, warehouse)
    assert rows(spark, warehouse / "target", "userId", "name", "city") == ordered(
        [(123, "Isabel", "Chihuahua"), *current])
    assert rows(spark, warehouse / "target_history", "userId", "name", "city", "__START_AT",
                "__END_AT") == history
