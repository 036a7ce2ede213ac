"""`create_auto_cdc_flow` and `create_auto_cdc_from_snapshot_flow` with every documented parameter:
each works as Databricks documents it, or is refused at load with one line.

References: https://docs.databricks.com/aws/en/ldp/developer/ldp-python-ref-apply-changes (the
`ignore_null_updates_column_list` / `ignore_null_updates_except_column_list` pair: nulls of an
update ignored on the columns listed, or on every column but those listed; one of the three
ignore-null arguments at a time; never a key), its SQL twin `IGNORE NULL UPDATES ON
{columnList | * EXCEPT (exceptColumnList)}`, and for `once` CREATE FLOW's `AUTO CDC ONCE`
(https://docs.databricks.com/aws/en/ldp/developer/ldp-sql-ref-create-flow): the source is read
as a batch, the flow runs once, and again when a full refresh recreates its target.
"""

from __future__ import annotations

import dataclasses
from textwrap import dedent

import pytest
from auto_cdc_crash import crash_after_target_commit
from test_auto_cdc import Tables, make_spec, up
from test_auto_cdc_scd2 import History
from test_auto_cdc_snapshot import DOCS_SNAPSHOT_1, DOCS_SNAPSHOT_2, SnapshotPipeline
from test_cli_dry_run import dry_run, pipeline_dir
from test_declaration_errors import auto_cdc, expected

from exactly_once.local.execution.pipeline import run_pipeline


# -- ignore_null_updates_column_list / _except_column_list -----------------------------------------
def test_scd1_ignores_nulls_on_the_columns_listed_only(spark, tmp_path):
    """Data columns `kind` and `value`; nulls of `value` are ignored, a null `kind` is written."""
    only_value = Tables(spark, tmp_path / "list",
                        make_spec(ignore_null_updates_column_list=("value",)))
    all_but_kind = Tables(spark, tmp_path / "except",
                          make_spec(ignore_null_updates_except_column_list=("kind",)))
    for tables in (only_value, all_but_kind):
        tables.apply([up("a", 1, "v1"), up("b", 1, "b1")])
        tables.apply([("a", 2, None, None, 0)])  # across batches: the target's value stays
        tables.apply([up("b", 3, "b3"), ("b", 4, None, None, 0)])  # inside one batch
        assert tables.table() == [("a", 2, None, "v1"), ("b", 4, None, "b3")]


def test_scd1_nulls_of_columns_not_listed_overwrite(spark, tmp_path):
    tables = Tables(spark, tmp_path, make_spec(ignore_null_updates_except_column_list=("value",)))
    tables.apply([up("a", 1, "v1")])
    tables.apply([("a", 2, None, None, 0)])
    assert tables.table() == [("a", 2, "upsert", None)]  # `kind` kept, `value` overwritten


def test_scd2_an_ignored_null_is_no_change_of_a_tracked_column(spark, tmp_path):
    """Tracked: `status`. A null status ignored keeps the version open (the note changes in
    place); a null note not ignored is written."""
    h = History(spark, tmp_path)
    h.spec = dataclasses.replace(h.spec, ignore_null_updates_column_list=("status",))
    h.apply([("a", 1, "upsert", "new", "n1", 0)])
    h.apply([("a", 2, "upsert", None, "n2", 0)])
    assert h.rows() == [("a", "new", "n2", 1, None)]
    h.apply([("a", 3, "upsert", "paid", None, 0)])
    assert h.rows() == [("a", "new", "n2", 1, 3), ("a", "paid", None, 3, None)]


# -- once: a one-time AUTO CDC flow over a batch source --------------------------------------------
ONCE = '''
from pyspark import pipelines as dp

@dp.temporary_view(name="history")
def history():
    return spark.read.format("delta").load({history!r})

@dp.table(name="changes")
def changes():
    return spark.readStream.format("delta").load({live!r})

dp.create_streaming_table("current")
dp.create_auto_cdc_flow(target="current", source="history", keys=["id"], sequence_by="seq",
                        name="backfill", once=True)
dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"], sequence_by="seq",
                        name="live")
'''


def write_changes(spark, path, rows: list[tuple]) -> None:
    spark.createDataFrame(rows, "id BIGINT, seq BIGINT, name STRING").write.format("delta") \
        .mode("append").save(str(path))


def test_a_once_auto_cdc_flow_applies_its_batch_once_and_again_after_a_full_refresh(
        spark, settings, tmp_path, monkeypatch):
    history, live = tmp_path / "history", tmp_path / "live"
    files = pipeline_dir(tmp_path, current=ONCE.format(history=str(history), live=str(live)))
    warehouse = tmp_path / "warehouse"

    def run(**kwargs):
        return run_pipeline(spark, settings, warehouse, pipelines_dir=files, **kwargs)

    def current():
        return sorted(tuple(r) for r in spark.read.format("delta")
                      .load(str(warehouse / "current")).collect())

    write_changes(spark, history, [(1, 1, "old1"), (2, 1, "old2")])
    write_changes(spark, live, [(1, 5, "live1")])
    with crash_after_target_commit(monkeypatch):  # the backfill's target commit, then killed
        run()
    run()
    assert current() == [(1, 5, "live1"), (2, 1, "old2")]
    write_changes(spark, history, [(3, 1, "old3")])
    write_changes(spark, live, [(2, 6, "live2")])
    result = run()
    assert current() == [(1, 5, "live1"), (2, 6, "live2")]  # the backfill did not run again
    assert [(f.kind, f.output_rows) for f in result.flows if f.flow == "backfill"] == [
        ("auto_cdc_once", 0)]
    run(full_refresh=["current"])
    assert current() == [(1, 5, "live1"), (2, 6, "live2"), (3, 1, "old3")]


def test_a_once_auto_cdc_flow_over_a_streaming_view_applies_what_is_there_once(
        spark, settings, tmp_path):
    """Databricks' database replication page hydrates a table with a once AUTO CDC flow over a
    streaming view (https://docs.databricks.com/aws/en/ldp/database-replication): the stream is
    read once, what it holds applied; later changes wait for a full refresh."""
    live = tmp_path / "live"
    write_changes(spark, live, [(1, 5, "live1")])
    files = pipeline_dir(tmp_path, current=dedent(f'''
        from pyspark import pipelines as dp

        @dp.temporary_view(name="changes")
        def changes():
            return spark.readStream.format("delta").load({str(live)!r})

        dp.create_streaming_table("current")
        dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"],
                                sequence_by="seq", once=True)
        '''))
    warehouse = tmp_path / "warehouse"

    def run(**kwargs):
        return run_pipeline(spark, settings, warehouse, pipelines_dir=files, **kwargs)

    def current():
        return sorted(tuple(r) for r in spark.read.format("delta")
                      .load(str(warehouse / "current")).collect())

    run()
    write_changes(spark, live, [(2, 6, "live2")])
    result = run()
    assert current() == [(1, 5, "live1")]
    assert [(f.kind, f.output_rows) for f in result.flows] == [("auto_cdc_once", 0)]
    run(full_refresh=["current"])
    assert current() == [(1, 5, "live1"), (2, 6, "live2")]


def test_a_once_snapshot_flow_asks_for_snapshots_in_one_update_only(spark, settings, tmp_path):
    pipeline = SnapshotPipeline(spark, settings, tmp_path, "stored_as_scd_type=1, once=True")
    pipeline.add(1, DOCS_SNAPSHOT_1)
    pipeline.run()
    assert pipeline.calls() == [None, 1]
    pipeline.add(2, DOCS_SNAPSHOT_2)
    pipeline.run()
    assert not (pipeline.snapshots / "calls.jsonl").exists()  # not asked at all
    assert pipeline.table() == sorted(DOCS_SNAPSHOT_1, key=repr)
    pipeline.run(full_refresh=["target"])
    assert pipeline.calls() == [None, 1, 2]
    assert pipeline.table() == sorted(DOCS_SNAPSHOT_2, key=repr)


# -- columns named as Spark resolves them ----------------------------------------------------------
# Spark's rules for a column's name (pyspark's `col`): a dot separates a struct's fields, a name
# with a dot or a backtick in it is written in backticks, a backtick doubled, and the case of a
# name does not matter (`spark.sql.caseSensitive` is off, as on Databricks).
ODD_NAMES = '''
import os
from pyspark import pipelines as dp
from pyspark.sql import functions as F

@dp.table(name="changes")
def changes():
    return spark.readStream.format("delta").load({live!r})

def next_snapshot(latest):
    version = (latest or 0) + 1
    path = os.path.join({snapshots!r}, str(version))
    if not os.path.exists(path):
        return None
    return spark.read.format("delta").load(path), version

dp.create_streaming_table("current")
dp.create_auto_cdc_flow(target="current", source="changes", keys=["`ORDER.ID`"],
                        sequence_by="seq", apply_as_deletes="op = 'D'",
                        column_list=["`Amount.USD`", "`NOTE``S`", "Seq"], ignore_null_updates=True)
dp.create_streaming_table("history")
dp.create_auto_cdc_flow(target="history", source="changes", keys=[F.col("`Order.Id`")],
                        sequence_by="seq", apply_as_deletes="op = 'D'", except_column_list=["OP"],
                        stored_as_scd_type=2, track_history_column_list=["`AMOUNT.usd`"])
dp.create_streaming_table("mirror")
dp.create_auto_cdc_from_snapshot_flow(target="mirror", source=next_snapshot,
                                      keys=["`Order.ID`"], stored_as_scd_type=2)
'''


def test_columns_named_in_another_case_or_with_a_dot_or_a_backtick_pass_through_auto_cdc(
        spark, settings, tmp_path):
    live, snapshots = tmp_path / "live", tmp_path / "snapshots"
    files = pipeline_dir(tmp_path, gold=ODD_NAMES.format(live=str(live), snapshots=str(snapshots)))
    warehouse = tmp_path / "warehouse"
    odd = "`order.id` BIGINT, seq BIGINT, op STRING, `amount.usd` DOUBLE, `note``s` STRING"

    def update(changes: list[tuple], snapshot: list[tuple], version: int) -> None:
        spark.createDataFrame(changes, odd).write.format("delta").mode("append").save(str(live))
        spark.createDataFrame(snapshot, odd).drop("seq", "op").write.format("delta") \
            .save(str(snapshots / str(version)))
        run_pipeline(spark, settings, warehouse, pipelines_dir=files)

    def table(name: str) -> tuple[list[str], list[tuple]]:
        df = spark.read.format("delta").load(str(warehouse / name))
        return df.columns, sorted((tuple(r) for r in df.collect()), key=repr)

    update([(1, 1, "U", 10.0, "a"), (2, 1, "U", 20.0, "b")],
           [(1, 0, "", 10.0, "a"), (2, 0, "", 20.0, "b")], 1)
    update([(1, 2, "U", 11.0, None), (2, 2, "D", None, None), (1, 3, "U", None, "a3")],
           [(1, 0, "", 11.0, "a3"), (3, 0, "", 30.0, "c")], 2)
    names = ["order.id", "seq", "amount.usd", "note`s"]
    assert table("current") == (["order.id", "amount.usd", "note`s", "seq"],
                                [(1, 11.0, "a3", 3)])  # nulls ignored, 2 deleted
    assert table("history") == ([*names, "__START_AT", "__END_AT"], sorted([
        (1, 1, 10.0, "a", 1, 2), (1, 2, 11.0, None, 2, 3), (1, 3, None, "a3", 3, None),
        (2, 1, 20.0, "b", 1, 2)], key=repr))
    assert table("mirror") == (["order.id", "amount.usd", "note`s", "__START_AT", "__END_AT"],
                               sorted([(1, 10.0, "a", 1, 2), (1, 11.0, "a3", 2, None),
                                       (2, 20.0, "b", 1, 2), (3, 30.0, "c", 2, None)], key=repr))


# -- refused at load -------------------------------------------------------------------------------
ONE_OF = ("create_auto_cdc_flow: give one of ignore_null_updates, "
          "ignore_null_updates_column_list or ignore_null_updates_except_column_list")
REFUSED = {
    "a key named by its struct's path": (
        auto_cdc('keys=["id.part"], sequence_by="ts"'),
        "create_auto_cdc_flow: keys: `id.part` is the field part of struct id; a column whose "
        "name has a dot is written in backticks (`id.part`)"),
    "a column list naming a field": (
        auto_cdc('keys=["id"], sequence_by="ts", column_list=[F.col("id"), F.col("s.name")]'),
        "create_auto_cdc_flow: column_list: `s.name` is the field name of struct s; a column "
        "whose name has a dot is written in backticks (`s.name`)"),
    "a backtick outside backticks": (
        auto_cdc('keys=["i`d"], sequence_by="ts"'),
        "create_auto_cdc_flow: keys: i`d is not a column's name: a name with a backtick is "
        "written in backticks, the backtick doubled (`i``d`)"),
    "ignore_null_updates with a list": (
        auto_cdc('keys=["id"], sequence_by="ts", ignore_null_updates=True, '
                 'ignore_null_updates_column_list=["name"]'), ONE_OF),
    "both ignore-null lists": (
        auto_cdc('keys=["id"], sequence_by="ts", ignore_null_updates_column_list=["name"], '
                 'ignore_null_updates_except_column_list=["ts"]'), ONE_OF),
    "a key whose nulls are ignored": (
        auto_cdc('keys=["id"], sequence_by="ts", ignore_null_updates_column_list=["id", "name"]'),
        "create_auto_cdc_flow: ignore_null_updates_column_list names the key `id`: a key "
        "identifies the row an update is for, and is never ignored"),
    "an ignore-null column the source lacks": (
        auto_cdc('keys=["id"], sequence_by="ts", ignore_null_updates_column_list=["nope"]'),
        "AUTO CDC flow `current`: ignore_null_updates_column_list names `nope`, not in "
        "`changes` (its columns: id, ts, name)"),
    "system_sequence_by": (
        auto_cdc('keys=["id"], sequence_by="ts", system_sequence_by="ts"'),
        "create_auto_cdc_flow: system_sequence_by is not supported by the local runtime"),
    "columns_to_update": (
        auto_cdc('keys=["id"], sequence_by="ts", columns_to_update="name"'),
        "create_auto_cdc_flow: columns_to_update is not supported by the local runtime"),
}


@pytest.mark.parametrize("files, message",
                         [pytest.param(*case, id=name) for name, case in REFUSED.items()])
def test_what_auto_cdc_does_not_support_is_refused_at_load(in_session, tmp_path, capsys, files,
                                                           message):
    root = pipeline_dir(tmp_path, **files)
    code, errors, _ = dry_run(root, capsys)
    assert (code, errors) == (1, [expected(root, "current", "current", message)])

