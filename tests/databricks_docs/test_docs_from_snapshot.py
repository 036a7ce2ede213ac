"""AUTO CDC FROM SNAPSHOT as Databricks documents it: the periodic snapshot of a table and the
historical snapshots a function returns, each target holding what the CDC page says it holds.

Pages:
- The AUTO CDC APIs, "Example: Periodic snapshot processing" and "Example: Historical snapshot
  processing": https://docs.databricks.com/aws/en/ldp/cdc
- create_auto_cdc_from_snapshot_flow:
  https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes-from-snapshot
"""

from __future__ import annotations

from docs_corpus import delta, dp_file, json_files, pipeline, refusal, rows, run

CDC = "https://docs.databricks.com/aws/en/ldp/cdc"
FROM_SNAPSHOT = ("https://docs.databricks.com/aws/en/ldp/developer/"
                 "ldp-python-ref-apply-changes-from-snapshot")


def test_periodic_snapshots_of_a_table(spark, settings, tmp_path):
    """CDC, periodic snapshots of a table (here a view of the pipeline over its files) as SCD
    type 2, one snapshot an update: key 1 is closed, key 2 gets a new version, key 3 opens, all
    at the second snapshot's version."""
    snapshot = json_files(tmp_path / "mytable", current=[{"Key": 1, "Value": "a1"},
                                                         {"Key": 2, "Value": "a2"}])
    root = pipeline(tmp_path, target=dp_file(f'''
        @dp.temporary_view
        def mytable():
          return spark.read.format("json").schema("Key BIGINT, Value STRING").load("{snapshot}")

        dp.create_streaming_table("target")

        dp.create_auto_cdc_from_snapshot_flow(
          target="target",
          source="mytable",
          keys=["Key"],
          stored_as_scd_type=2
        )
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    json_files(snapshot, current=[{"Key": 2, "Value": "b2"}, {"Key": 3, "Value": "a3"}])
    run(spark, settings, root, warehouse)
    table = {(r["Key"], r["Value"]): (r["__START_AT"], r["__END_AT"])
             for r in delta(spark, warehouse / "target").collect()}
    assert sorted(table) == [(1, "a1"), (2, "a2"), (2, "b2"), (3, "a3")]
    first, second = table[(1, "a1")][0], table[(2, "b2")][0]
    assert first < second
    assert table == {(1, "a1"): (first, second), (2, "a2"): (first, second),
                     (2, "b2"): (second, None), (3, "a3"): (second, None)}


def test_historical_snapshots_a_function_returns(spark, settings, tmp_path):
    """CDC, "Example: Historical snapshot processing": two snapshot files read in order by
    `next_snapshot_and_version`, SCD type 2 tracking TrackingColumn only; "After processing the
    snapshots, the target table contains the following records"."""
    files = tmp_path / "snapshots"
    files.mkdir()
    (files / "filename1.csv").write_text("Key,TrackingColumn,NonTrackingColumn\n"
                                         "1,a1,b1\n2,a2,b2\n4,a4,b4\n")
    (files / "filename2.csv").write_text("Key,TrackingColumn,NonTrackingColumn\n"
                                         "2,a2_new,b2\n3,a3,b3\n4,a4,b4_new\n")
    root = pipeline(tmp_path, target=dp_file(f'''
        import os

        def exist(file_name):
          return os.path.exists(file_name)

        # This function returns a tuple, where snapshot_df is the next snapshot DataFrame to
        # process, and snapshot_version is the snapshot version that corresponds to snapshot_df.
        def next_snapshot_and_version(latest_snapshot_version):
          latest_snapshot_version = latest_snapshot_version or 0
          next_version = latest_snapshot_version + 1
          file_name = "{files}/filename" + str(next_version) + ".csv"
          if (exist(file_name)):
            return (spark.read.format("csv").option("header", True)
                    .schema("Key BIGINT, TrackingColumn STRING, NonTrackingColumn STRING")
                    .load(file_name), next_version)
          else:
            # No snapshot available
            return None

        dp.create_streaming_table("target")

        dp.create_auto_cdc_from_snapshot_flow(
          target = "target",
          source = next_snapshot_and_version,
          keys = ["Key"],
          stored_as_scd_type = 2,
          track_history_column_list = ["TrackingColumn"]
        )
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    assert rows(spark, warehouse / "target", "Key", "TrackingColumn", "NonTrackingColumn",
                "__START_AT", "__END_AT") == [
        (1, "a1", "b1", 1, 2),
        (2, "a2", "b2", 1, 2),
        (2, "a2_new", "b2", 2, None),
        (3, "a3", "b3", 2, None),
        (4, "a4", "b4_new", 1, None),
    ]


def test_both_auto_cdc_kinds_into_one_table_are_one_line(in_session, tmp_path, capsys):
    """FROM_SNAPSHOT: "You cannot target the same streaming table with both
    create_auto_cdc_from_snapshot_flow() and create_auto_cdc_flow()"."""
    root = pipeline(tmp_path, target=dp_file('''
        @dp.temporary_view
        def changes():
          return spark.readStream.format("rate").load().selectExpr(
            "value AS Key", "timestamp AS ts")

        @dp.temporary_view
        def mytable():
          return spark.range(3).selectExpr("id AS Key", "current_timestamp() AS ts")

        dp.create_streaming_table("target")
        dp.create_auto_cdc_flow(target="target", source="changes", keys=["Key"],
                                sequence_by="ts", name="changes_flow")
        dp.create_auto_cdc_from_snapshot_flow(target="target", source="mytable", keys=["Key"])
        '''))
    refusal(root, capsys, "target", "target", ["snapshot"])


def test_dry_run_and_rederive_ask_for_the_next_snapshot_as_an_update_does(
        spark, settings, tmp_path, in_session, capsys):
    """FROM_SNAPSHOT: the function is given "the latest snapshot version processed", None only
    before the first. A dry-run against the warehouse asks it what the next update will (here
    version 1), and working out what `rederive` rebuilds asks it nothing: only the update that
    follows asks, with version 1."""
    from exactly_once import cli

    asked = tmp_path / "asked.txt"
    root = pipeline(tmp_path, people=dp_file(f'''
        def next_snapshot_and_version(latest_snapshot_version):
          with open("{asked}", "a") as log:
            log.write(f"{{latest_snapshot_version!r}}\\n")
          if latest_snapshot_version is None:
            return (spark.createDataFrame([(1, "Alice")], "id BIGINT, name STRING"), 1)
          return None

        dp.create_streaming_table("people")
        dp.create_auto_cdc_from_snapshot_flow(
          target="people",
          source=next_snapshot_and_version,
          keys=["id"])

        @dp.materialized_view
        def people_count():
          return spark.read.table("people").groupBy().count()
        '''))
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse)
    assert asked.read_text().split() == ["None", "1"]  # the first update
    asked.unlink()
    code = cli.main(["dry-run", "--pipelines", str(root), "--warehouse", str(warehouse)])
    assert code == 0, capsys.readouterr()
    assert asked.read_text().split() == ["1"]
    asked.unlink()
    result = run(spark, settings, root, warehouse, rederive=[])
    assert result.reset == ["people_count"]
    assert asked.read_text().split() == ["1"]
    assert rows(spark, warehouse / "people") == [(1, "Alice")]
