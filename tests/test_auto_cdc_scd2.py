"""SCD2 AUTO CDC on real Delta tables: versions, late events, deletes, crash replay."""

from __future__ import annotations

import json

import pytest
from auto_cdc_crash import crash_after_target_commit
from pyspark.sql import functions as F
from spark_probes import ShuffledRowsByStep, last_operation, plan_calls_of_a_wide_batch

from exactly_once.errors import FlowError
from exactly_once.local.auto_cdc import changes, scd2
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.scd2 import (
    apply_scd2_batch,
    ensure_state_table,
    target_schema,
)
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.storage import delta_log
from exactly_once.table_properties import TOMBSTONE_GC_NEVER_SECONDS

SCHEMA = "id STRING, seq BIGINT, kind STRING, status STRING, note STRING, off BIGINT"


def history_spec() -> AutoCdcSpec:  # Columns need a live session: not at import time
    return AutoCdcSpec(name="hist", target="h", source="s", keys=("id",),
                       sequence_by=F.struct("seq", "off"),
                       apply_as_deletes=F.expr("kind = 'delete'"),
                       except_column_list=("off",), stored_as_scd_type=2,
                       track_history_column_list=("status",))


class History:
    def __init__(self, spark, path):
        self.spark = spark
        self.spec = history_spec()
        self.target, self.state = str(path / "target"), str(path / "state")
        self.rejected = str(path / "rejected")
        sample = spark.createDataFrame([], SCHEMA)
        spark.createDataFrame([], target_schema(self.spec, sample)).write.format("delta") \
            .save(self.target)
        ensure_state_table(spark, self.spec, sample, self.state)
        self.next_batch = 0
        self.attempted: set[int] = set()  # batch ids run before: running one again replays it

    def apply(self, rows, batch_id=None, step=None):
        """`step`: the batch's step recorder (BatchWrite.step)."""
        batch_id = self.next_batch if batch_id is None else batch_id
        self.next_batch = batch_id + 1
        batch = self.spark.createDataFrame(rows, SCHEMA)
        write = BatchWrite("test-query", batch_id, replayed=batch_id in self.attempted,
                           **({"step": step} if step else {}))
        self.attempted.add(batch_id)
        return apply_scd2_batch(self.spark, batch, self.spec, self.target, self.state, write,
                                rejected_path=self.rejected)

    def rows(self):
        """(id, status, note, start seq, end seq or None), by key and start."""
        df = self.spark.read.format("delta").load(self.target)
        return sorted(((r["id"], r["status"], r["note"], r["__START_AT"]["seq"],
                       r["__END_AT"]["seq"] if r["__END_AT"] else None) for r in df.collect()),
                      key=lambda row: (row[0], row[3]))


def up(key, seq, status, note="", off=0):
    return (key, seq, "upsert", status, note, off)


def delete(key, seq):
    return (key, seq, "delete", None, None, 0)


def test_versions_into_an_empty_target_are_appended_and_later_ones_replace_theirs(spark,
                                                                                 tmp_path):
    """An empty target has no version to close or replace: the batch's versions are appended,
    one write; the next batch's versions replace those of its keys (one overwrite commit whose
    predicate names the keys), closing them; other keys' rows stay as they were."""
    h = History(spark, tmp_path)
    h.apply([up("a", 1, "new"), up("a", 2, "paid"), up("b", 1, "new")])
    assert last_operation(h.target) == "WRITE"
    assert h.rows() == [("a", "new", "", 1, 2), ("a", "paid", "", 2, None),
                        ("b", "new", "", 1, None)]
    h.apply([up("c", 1, "new")])
    h.apply([up("a", 3, "shipped"), delete("b", 2)])
    commit = delta_log.commit_info(h.target, delta_log.latest_version(h.target))
    assert commit["operation"] == "WRITE"
    assert commit["operationParameters"]["mode"] == "Overwrite"
    assert "'a'" in commit["operationParameters"]["predicate"] \
        and "'c'" not in commit["operationParameters"]["predicate"]
    assert h.rows() == [("a", "new", "", 1, 2), ("a", "paid", "", 2, 3),
                        ("a", "shipped", "", 3, None), ("b", "new", "", 1, 2),
                        ("c", "new", "", 1, None)]


def test_a_batch_reads_only_its_own_keys_journal_and_versions(spark, tmp_path, monkeypatch):
    """The journal holds every event of every key; a batch needs only its own keys' events
    (for a journal of more rows than `changes.KEYED_STATE_READ_MIN_ROWS`, 100 here), which are
    kept as the journal is read, before it is reduced to one event per sequence and replayed,
    and its write replaces only its keys' versions of the target: the rows the batch's steps
    shuffle follow the batch (3 events, 2 keys), not the journal and target (300 keys)."""
    monkeypatch.setattr(changes, "KEYED_STATE_READ_MIN_ROWS", 100)
    h = History(spark, tmp_path)
    h.apply([up(f"k{i:03d}", 1, "new") for i in range(300)])
    shuffled = ShuffledRowsByStep(spark)
    h.apply([up("k007", 2, "paid"), up("k007", 1, "new"), up("fresh", 1, "new")],
            step=shuffled.step)
    # The replace's shuffles also carry Delta's own: its snapshot of the target rebuilt from
    # the log's actions (a dozen here), before it finds the files that hold the keys.
    assert shuffled.rows["changes"] + shuffled.rows["target replace"] <= 40, shuffled.rows
    rows = h.rows()
    assert len(rows) == 302 and ("k007", "new", "", 1, 2) in rows \
        and ("k007", "paid", "", 2, None) in rows and ("fresh", "new", "", 1, None) in rows


@pytest.mark.parametrize("key_type, values", [
    ("INT, region STRING", [(1, "eu"), (1, "us"), (2, "it's")]),  # typed literals
    ("TIMESTAMP, region STRING", [("2026-01-01 00:00:00.000001", "eu"),  # as JSON
                                  ("2026-01-01 00:00:00.000001", "us"),
                                  ("2026-01-02 00:00:00", "eu")]),
])
def test_a_batch_replaces_the_versions_of_its_keys_whatever_their_type(spark, tmp_path,
                                                                       key_type, values):
    """The target's rows a batch replaces are named by their keys: a composite key, of a type
    cast from a string exactly (then typed literals) or not (then `to_json` of the keys), and
    a quote in a key. Only the batch's keys' rows change."""
    schema = f"id {key_type}, seq BIGINT, status STRING"
    spec = AutoCdcSpec(name="hist", target="h", source="s", keys=("id", "region"),
                       sequence_by=F.col("seq"), stored_as_scd_type=2)
    target, state = str(tmp_path / "target"), str(tmp_path / "state")
    rows = [(spark.sql(f"SELECT CAST('{v}' AS {key_type.split(',')[0]})").first()[0]
             if isinstance(v, str) else v, r) for v, r in values]
    sample = spark.createDataFrame([], schema)
    spark.createDataFrame([], target_schema(spec, sample)).write.format("delta").save(target)
    ensure_state_table(spark, spec, sample, state)

    def apply(batch_id, events):
        apply_scd2_batch(spark, spark.createDataFrame(events, schema), spec, target, state,
                         BatchWrite("q", batch_id))

    apply(0, [(*key, 1, "new") for key in rows])
    apply(1, [(*rows[0], 2, "paid"), (*rows[2], 2, "paid")])
    assert last_operation(target) == "WRITE"
    got = sorted((r["id"], r["region"], r["status"], r["__START_AT"], r["__END_AT"])
                 for r in spark.read.format("delta").load(target).collect())
    assert got == sorted([(*rows[0], "new", 1, 2), (*rows[0], "paid", 2, None),
                          (*rows[1], "new", 1, None),
                          (*rows[2], "new", 1, 2), (*rows[2], "paid", 2, None)])


def test_a_batch_s_plan_is_built_in_a_few_calls_into_the_jvm(spark, tmp_path):
    """As SCD1's (test_auto_cdc.py): the plan's expressions are SQL text, not a call per column,
    alias and list element: under 220 calls for this source of 26 columns (623 before)."""
    calls = plan_calls_of_a_wide_batch(spark, scd2, history_spec(), SCHEMA,
                                       ("a", 1, "upsert", "new", "", 0), tmp_path)
    assert calls["plan"] <= 220, calls


def test_versions_deletes_and_late_events(spark, tmp_path):
    h = History(spark, tmp_path)
    columns = spark.read.format("delta").load(h.target).schema
    assert columns["__START_AT"].dataType == columns["__END_AT"].dataType \
        == spark.createDataFrame([], SCHEMA).select(F.struct("seq", "off")).schema[0].dataType
    # untracked `note` changes update the version in place; a `status` change opens one
    stats = h.apply([up("a", 2, "new", "y"), up("a", 1, "new", "x"), up("a", 3, "paid", "y"),
                     up("b", 1, "new")])
    assert h.rows() == [("a", "new", "y", 1, 3), ("a", "paid", "y", 3, None),
                        ("b", "new", "", 1, None)]
    assert (stats.upserts, stats.deletes, stats.stale) == (4, 0, 0)
    h.apply([delete("a", 5)])  # closes the current version, opens none
    assert h.rows()[:2] == [("a", "new", "y", 1, 3), ("a", "paid", "y", 3, 5)]
    h.apply([up("a", 4, "shipped")])  # late, older than the delete: a closed version
    assert h.rows()[:3] == [("a", "new", "y", 1, 3), ("a", "paid", "y", 3, 4),
                            ("a", "shipped", "", 4, 5)]
    stats = h.apply([up("a", 4, "shipped"), up("a", 6, "new", "back")])  # redelivery + newer
    assert stats.stale == 1
    assert h.rows() == [("a", "new", "y", 1, 3), ("a", "paid", "y", 3, 4),
                        ("a", "shipped", "", 4, 5), ("a", "new", "back", 6, None),
                        ("b", "new", "", 1, None)]


def test_out_of_order_history_equals_in_order_history(spark, tmp_path):
    events = [up("a", 1, "new", "x"), up("a", 5, "paid", "x"), up("a", 3, "shipped", "x"),
              up("a", 4, "shipped", "z"), up("a", 2, "new", "w"), delete("a", 7),
              up("a", 6, "paid", "q")]
    late = History(spark, tmp_path / "late")
    late.apply(events[:2])
    assert late.rows() == [("a", "new", "x", 1, 5), ("a", "paid", "x", 5, None)]
    late.apply(events[2:3])  # lands inside [1, 5): splits it
    assert late.rows() == [("a", "new", "x", 1, 3), ("a", "shipped", "x", 3, 5),
                           ("a", "paid", "x", 5, None)]
    for event in events[3:]:
        late.apply([event])
    in_order = History(spark, tmp_path / "in_order")
    in_order.apply(sorted(events, key=lambda e: e[1]))
    assert late.rows() == in_order.rows() == [
        ("a", "new", "w", 1, 3), ("a", "shipped", "z", 3, 5), ("a", "paid", "q", 5, 7)]


def test_a_crash_between_the_commits_and_rejected_rows(spark, tmp_path, monkeypatch):
    h = History(spark, tmp_path)
    h.apply([up("a", 1, "new")], batch_id=0)
    batch = [up("a", 3, "paid"), up("a", 2, "new", "n"), (None, 4, "upsert", "x", "", 0),
             ("b", None, "upsert", "x", "", 0)]
    with crash_after_target_commit(monkeypatch):
        h.apply(batch, batch_id=1)
    stats = h.apply(batch, batch_id=1)  # the replay: target write skipped, journal written
    assert stats.rejected == 2
    h.apply([up("a", 4, "paid", "m")], batch_id=2)  # decided from the replayed journal
    assert h.rows() == [("a", "new", "n", 1, 3), ("a", "paid", "m", 3, None)]
    rejected = spark.read.format("delta").load(h.rejected)
    assert sorted(r.reason for r in rejected.collect()) == ["null key (id)", "null sequence"]


def test_a_pipeline_runs_scd1_and_scd2_flows_over_two_updates(spark, tmp_path):
    from test_local_runtime import write_pipeline

    from exactly_once.local.execution.update import PipelineUpdate
    from exactly_once.local.graph.loader import load_graph
    from exactly_once.local.storage.warehouse import Warehouse

    changes = str(tmp_path / "changes")
    files = write_pipeline(tmp_path / "p", f"""
        from pyspark import pipelines as dp

        @dp.temporary_view(name="changes")
        def changes():
            return spark.readStream.format("delta").load("{changes}")

        dp.create_streaming_table(name="current", table_properties={{
            "pipelines.cdc.tombstoneGCThresholdInSeconds": "{TOMBSTONE_GC_NEVER_SECONDS}"}})
        dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"],
                                sequence_by="seq", apply_as_deletes="kind = 'delete'",
                                except_column_list=["kind", "off"])
        dp.create_streaming_table(name="history")
        dp.apply_changes(target="history", source="changes", keys=["id"], sequence_by="seq",
                         apply_as_deletes="kind = 'delete'", stored_as_scd_type="2",
                         track_history_except_column_list=["note", "seq"],
                         except_column_list=["kind", "off"])
    """)
    warehouse = Warehouse(tmp_path / "wh")

    def update(rows):
        spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(changes)
        return PipelineUpdate(spark, load_graph(spark, files), warehouse).run()

    update([up("a", 2, "paid"), up("a", 1, "new"), delete("b", 1), (None, 1, "x", "y", "", 0)])
    result = update([up("a", 3, "paid", "late note"), delete("a", 4), up("a", 1, "new")])
    assert {f.flow: (f.output_rows, f.cdc_stale) for f in result.flows} == {
        "current": (1, 2), "history": (2, 1)}  # SCD1 reduces a 3 into a 4 (stale)
    table = spark.read.format("delta").load
    assert table(str(warehouse.table_path("current"))).count() == 0
    history = table(str(warehouse.table_path("history"))).orderBy("__START_AT").collect()
    assert [(r.status, r.note, r["__START_AT"], r["__END_AT"]) for r in history] == [
        ("new", "", 1, 2), ("paid", "late note", 2, 4)]
    state = str(warehouse.auto_cdc_state_path("current"))
    assert table(state).where("__is_delete").count() == 2  # tombstones of `a` and `b` kept
    rejected = table(str(warehouse.auto_cdc_rejected_path("current"))).collect()
    assert [(r.flow, r.reason) for r in rejected] == [("current", "null key (id)")]
    # The runtime's own tables keep the statistics it reads: the SCD1 state those of its
    # tombstones' times (their GC), the journal none, the event log those a reader filters on.
    assert columns_with_statistics(state) == {"__deleted_at": None}
    assert columns_with_statistics(str(warehouse.auto_cdc_state_path("history"))) == {}
    assert columns_with_statistics(str(warehouse.event_log_path())) == {
        "timestamp": None, "event_type": None, "origin": {"update_id": None}}
    assert len(columns_with_statistics(str(warehouse.table_path("history")))) > 3  # Delta's default


def columns_with_statistics(path: str) -> dict:
    """The columns of which Delta wrote statistics in every live file of the table at `path`
    (its files' `nullCount`, which names each such column), as nested dictionaries."""
    def shape(counts: dict) -> dict:
        return {k: shape(v) if isinstance(v, dict) else None for k, v in counts.items()}
    found = {json.dumps(shape(stats.get("nullCount", {})), sort_keys=True)
             for stats in delta_log.live_file_stats(path) or []}
    assert len(found) == 1, found
    return json.loads(found.pop())


def test_an_scd1_table_that_expires_tombstones_beside_scd2_loads_with_a_warning(spark,
                                                                                tmp_path):
    """Databricks runs it (tests/databricks_docs/test_docs_current_beside_history.py): the
    graph loads, and names the SCD1 table whose rows depend on when the pipeline runs; one that
    keeps its tombstones is not named."""
    from test_local_runtime import write_pipeline

    from exactly_once.local.graph.loader import load_graph

    files = write_pipeline(tmp_path / "p", f"""
        from pyspark import pipelines as dp

        @dp.temporary_view(name="changes")
        def changes():
            return spark.readStream.format("delta").load("/nowhere")

        dp.create_streaming_table(name="current")  # Databricks' default: 2 days
        dp.create_auto_cdc_flow(target="current", source="changes", keys=["id"],
                                sequence_by="seq", apply_as_deletes="kind = 'delete'")
        dp.create_streaming_table(name="kept", table_properties={{
            "pipelines.cdc.tombstoneGCThresholdInSeconds": "{TOMBSTONE_GC_NEVER_SECONDS}"}})
        dp.create_auto_cdc_flow(target="kept", source="changes", keys=["id"],
                                sequence_by="seq", apply_as_deletes="kind = 'delete'")
        dp.create_streaming_table(name="history")
        dp.create_auto_cdc_flow(target="history", source="changes", keys=["id"],
                                sequence_by="seq", apply_as_deletes="kind = 'delete'",
                                stored_as_scd_type=2)
    """)
    warnings = dict(load_graph(spark, files).wall_clock_warnings())
    assert list(warnings) == ["current"]
    assert "after 172800 s" in warnings["current"] and "`history`" in warnings["current"]


def test_a_state_table_that_is_not_this_flow_s_journal_is_refused(spark, tmp_path):
    """The journal's columns are checked from its log: a table at the state's path without
    them (written by another flow, or an SCD1 state) stops the flow with what it lacks."""
    history = History(spark, tmp_path)
    other = str(tmp_path / "other")
    spark.createDataFrame([("a", 1)], "id STRING, seq BIGINT").write.format("delta").save(other)
    sample = spark.createDataFrame([], SCHEMA)
    with pytest.raises(FlowError, match=r"not written by this SCD2 flow \(no \['__is_delete', "
                                         r"'__sequence', 'kind', 'note', 'status'\]\)"):
        ensure_state_table(spark, history.spec, sample, other)
    ensure_state_table(spark, history.spec, sample, history.state)  # its own: accepted
