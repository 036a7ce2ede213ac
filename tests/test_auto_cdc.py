"""SCD1 AUTO CDC on real Delta tables, one micro-batch at a time."""

from __future__ import annotations

import json
import time

import pytest
from auto_cdc_crash import crash_after_target_commit
from pyspark.sql import functions as F
from spark_probes import (
    ShuffledRowsByStep,
    calls_into_the_jvm,
    last_operation,
    plan_calls_of_a_wide_batch,
    runs_python_worker,
    scan_of,
)

from exactly_once.local.auto_cdc import changes, scd1
from exactly_once.local.auto_cdc.commits import BatchWrite
from exactly_once.local.auto_cdc.scd1 import (
    apply_scd1_batch,
    ensure_state_table,
    expired_tombstones,
    state_schema,
    target_schema,
)
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.snapshot_files import (
    PATHS_LISTED_IN_DRIVER,
    compact_when_many_files,
    read_latest,
)
from exactly_once.local.storage.warehouse import as_written
from exactly_once.table_properties import TOMBSTONE_GC_THRESHOLD as TOMBSTONE_GC_PROPERTY

SCHEMA = "id STRING, seq BIGINT, kind STRING, value STRING, off BIGINT"


def make_spec(**overrides) -> AutoCdcSpec:  # Columns need a live session: not at import time
    args = dict(name="cdc", target="t", source="s", keys=("id",),
                sequence_by=F.struct("seq", "off"),
                apply_as_deletes=F.expr("kind = 'delete'"), except_column_list=("off",))
    return AutoCdcSpec(**{**args, **overrides})


class Tables:
    def __init__(self, spark, tmp_path, spec=None):
        self.spark, self.spec = spark, spec or make_spec()
        spec = self.spec
        self.target, self.state = str(tmp_path / "target"), str(tmp_path / "state")
        self.rejected = str(tmp_path / "rejected")
        sample = spark.createDataFrame([], SCHEMA)
        spark.createDataFrame([], target_schema(spec, sample)).write.format("delta").save(
            self.target)
        ensure_state_table(spark, spec, sample, self.state)
        self.next_batch = 0
        self.attempted: set[int] = set()  # batch ids run before: running one again replays it

    def apply(self, rows, batch_id=None, query="test-query", step=None, **options):
        """`query`: the streaming query's id; another one is a new checkpoint (batch ids anew).
        `step`: the batch's step recorder (BatchWrite.step)."""
        batch_id = self.next_batch if batch_id is None else batch_id
        self.next_batch = batch_id + 1
        batch = self.spark.createDataFrame(rows, SCHEMA)
        write = BatchWrite(query, batch_id, replayed=batch_id in self.attempted,
                           **({"step": step} if step else {}))
        self.attempted.add(batch_id)
        return apply_scd1_batch(self.spark, batch, self.spec, self.target, self.state, write,
                                rejected_path=self.rejected, **options)

    def rows(self):
        df = self.spark.read.format("delta").load(self.target)
        return sorted((r["id"], r["seq"], r["value"]) for r in df.collect())

    def table(self, path=None):
        df = self.spark.read.format("delta").load(path or self.target)
        return sorted(tuple(r) for r in df.collect())


def up(key, seq, value, off=0):
    return (key, seq, "upsert", value, off)


def delete(key, seq, off=0):
    return (key, seq, "delete", None, off)


@pytest.fixture
def tables(spark, tmp_path):
    return Tables(spark, tmp_path)


def test_out_of_order_across_batches_resolves_to_the_highest_sequence(tables):
    tables.apply([up("a", 1, "v1"), up("a", 3, "v3")])
    stats = tables.apply([up("a", 2, "v2")])  # arrives late, older than stored
    assert tables.rows() == [("a", 3, "v3")]
    assert (stats.upserts, stats.stale) == (0, 1)


def test_several_events_of_one_key_in_a_batch_reduce_to_the_newest(tables):
    stats = tables.apply([up("a", 2, "v2"), up("a", 5, "v5"), up("a", 4, "v4"), up("b", 1, "b1")])
    assert tables.rows() == [("a", 5, "v5"), ("b", 1, "b1")]
    assert (stats.upserts, stats.stale) == (2, 2)


def test_ties_on_sequence_are_broken_by_the_struct_tail(tables):
    tables.apply([up("a", 1, "first", off=10), up("a", 1, "second", off=11)])
    assert tables.rows() == [("a", 1, "second")]


def test_a_batch_into_an_empty_target_is_appended_and_one_into_rows_merged(tables):
    """Into a target whose log says it holds no rows a MERGE could only insert: the upserts
    are appended, one write (a delete of a key it never held changes nothing); the next batch
    MERGEs into the rows. A replay of the appended batch writes nothing again."""
    stats = tables.apply([up("a", 1, "v1"), up("b", 2, "b2"), delete("c", 1), up("a", 3, "v3")])
    assert last_operation(tables.target) == "WRITE"
    assert tables.rows() == [("a", 3, "v3"), ("b", 2, "b2")]
    assert (stats.upserts, stats.deletes, stats.stale) == (2, 1, 1)
    version = delta_log.latest_version(tables.target)
    replayed = tables.apply([up("a", 1, "v1"), up("b", 2, "b2")], batch_id=0)
    assert delta_log.latest_version(tables.target) == version and replayed.upserts == 0
    tables.apply([up("b", 3, "b3"), delete("a", 4), up("d", 1, "d1")])
    assert last_operation(tables.target) == "MERGE"
    assert tables.rows() == [("b", 3, "b3"), ("d", 1, "d1")]


def test_a_batch_of_keys_the_target_does_not_hold_is_appended(tables):
    """Keys the state table says the target does not hold (never seen, or deleted) can only be
    inserted: the batch is appended, as into an empty target. A key the target holds, a delete
    of one, makes it a MERGE."""
    tables.apply([up("a", 1, "a1"), up("b", 1, "b1")])
    stats = tables.apply([up("c", 1, "c1"), up("a", 0, "stale"), delete("x", 1)])
    assert last_operation(tables.target) == "WRITE"
    assert (stats.upserts, stats.deletes, stats.stale) == (1, 1, 1)
    tables.apply([delete("b", 2)])
    assert last_operation(tables.target) == "MERGE"
    tables.apply([up("b", 3, "b3"), up("d", 1, "d1")])  # b's tombstone: not in the target
    assert last_operation(tables.target) == "WRITE"
    tables.apply([up("a", 2, "a2"), up("e", 1, "e1")])
    assert last_operation(tables.target) == "MERGE"
    assert tables.rows() == [("a", 2, "a2"), ("b", 3, "b3"), ("c", 1, "c1"), ("d", 1, "d1"),
                             ("e", 1, "e1")]


def test_a_new_checkpoint_after_a_crash_between_the_commits_merges_what_the_state_lacks(
        tables, monkeypatch):
    """The target committed a batch the state table never recorded, and the checkpoint was
    then replaced (a new query id: no replay skips the write). The state table cannot say which
    keys the target holds, so the batch is merged, not appended: no key twice."""
    tables.apply([up("a", 1, "a1")], query="first")
    with crash_after_target_commit(monkeypatch):
        tables.apply([up("b", 1, "b1")], query="first")
    tables.apply([up("a", 1, "a1"), up("b", 1, "b1")], batch_id=0, query="second")
    assert last_operation(tables.target) == "MERGE"
    assert tables.rows() == [("a", 1, "a1"), ("b", 1, "b1")]
    tables.apply([up("c", 1, "c1")], query="second")  # the state caught up: appended again
    assert last_operation(tables.target) == "WRITE"
    assert tables.rows() == [("a", 1, "a1"), ("b", 1, "b1"), ("c", 1, "c1")]


def test_a_delete_leaves_a_tombstone_that_older_upserts_cannot_pass(tables):
    tables.apply([up("a", 1, "v1"), up("b", 1, "b1")])
    tables.apply([delete("a", 3)])
    assert tables.rows() == [("b", 1, "b1")]
    stats = tables.apply([up("a", 2, "stale")])  # older than the delete: must not resurrect
    assert tables.rows() == [("b", 1, "b1")] and stats.stale == 1
    tables.apply([up("a", 4, "reborn")])  # newer than the delete: revives the key
    assert tables.rows() == [("a", 4, "reborn"), ("b", 1, "b1")]


def test_an_older_delete_does_not_remove_newer_state(tables):
    tables.apply([up("a", 5, "v5")])
    tables.apply([delete("a", 4)])
    assert tables.rows() == [("a", 5, "v5")]


def test_null_keys_and_sequences_are_rejected_with_a_reason_not_merged(tables, spark):
    batch = [(None, 1, "upsert", "x", 0), ("a", None, "upsert", "y", 0),
             ("b", 1, "upsert", "half", None), up("b", 1, "b1")]
    stats = tables.apply(batch, batch_id=0)
    assert tables.rows() == [("b", 1, "b1")]
    assert stats.rejected == 3
    tables.apply(batch, batch_id=0)  # a replay does not record them twice
    rejected = spark.read.format("delta").load(tables.rejected)
    assert sorted((r.flow, r.batch_id, r.reason, json.loads(r.record).get("value"))
                  for r in rejected.collect()) == [
        ("cdc", 0, "null key (id)", "x"), ("cdc", 0, "null sequence", "half"),
        ("cdc", 0, "null sequence", "y")]
    assert rejected.where("rejected_at IS NULL").count() == 0
    # Every field, NULLs included: the row rejected for its NULL key shows the key as null.
    (null_key,) = [json.loads(r.record) for r in rejected.collect() if "key" in r.reason]
    assert null_key == {"id": None, "seq": 1, "kind": "upsert", "value": "x", "off": 0}


def test_ignore_null_updates_keeps_the_values_nulls_would_erase(spark, tmp_path):
    tables = Tables(spark, tmp_path, make_spec(ignore_null_updates=True))
    tables.apply([up("a", 1, "v1"), up("b", 1, "b1")])
    tables.apply([up("a", 2, None)])  # NULL keeps v1, the sequence still moves
    tables.apply([up("a", 4, "v4"), up("a", 5, None),  # reduced in the batch: v4
                  delete("b", 2), up("b", 3, None)])  # re-inserted after a delete: no memory
    assert tables.rows() == [("a", 5, "v4"), ("b", 3, None)]
    tables.apply([up("a", 3, "stale"), up("a", 6, None)])  # the stale one fills nothing
    assert tables.rows() == [("a", 6, "v4"), ("b", 3, None)]


def test_truncate_and_column_list(spark, tmp_path):
    spec = make_spec(except_column_list=None, column_list=("value",),
                     apply_as_truncates=F.expr("kind = 'truncate'"))
    tables = Tables(spark, tmp_path, spec)
    assert spark.read.format("delta").load(tables.target).columns == ["id", "value"]
    tables.apply([up("a", 1, "a1"), up("b", 1, "b1"), up("c", 9, "c9")])
    stats = tables.apply([(None, 5, "truncate", None, 0), up("b", 4, "before"),
                          up("d", 6, "d6")])
    assert tables.table() == [("c", "c9"), ("d", "d6")]  # c is newer than the truncate
    assert (stats.truncates, stats.deletes, stats.upserts, stats.stale) == (1, 2, 1, 1)
    tables.apply([up("a", 3, "late"), up("a", 2, "older")])  # before the truncate: stays gone
    tables.apply([up("b", 7, "b7")])
    assert tables.table() == [("b", "b7"), ("c", "c9"), ("d", "d6")]


def test_tombstones_expire_after_the_retention_threshold(tables, spark):
    assert make_spec().tombstone_gc_seconds() == 2 * 24 * 3600
    assert make_spec(target_properties={TOMBSTONE_GC_PROPERTY: "0.5"}).tombstone_gc_seconds() \
        == 0.5
    tables.apply([up("a", 1, "v1"), up("b", 1, "b1")])
    tables.apply([delete("a", 3), delete("b", 3)], tombstone_gc_seconds=3600)
    state = spark.read.format("delta").load(tables.state)
    assert state.where("__is_delete AND __deleted_at IS NOT NULL").count() == 2
    time.sleep(1)
    tables.apply([up("b", 2, "stale")], tombstone_gc_seconds=0.5)  # GC runs after the batch
    assert tables.rows() == [] and spark.read.format("delta").load(tables.state).count() == 0
    tables.apply([up("a", 2, "too late")])  # past retention, an older event is applied again
    assert tables.rows() == [("a", 2, "too late")]


def test_expired_tombstones_are_computed_in_the_jvm_without_a_python_worker(tables, spark):
    """The GC pass's keys are rows computed once (its MERGE must not read the state table it
    deletes from), kept in the driver's JVM: a DataFrame of a Python list would run PySpark's
    Python worker, a process of its own in a new JVM (as the event log's did)."""
    tables.apply([up("a", 1, "v1"), up("b", 1, "b1"), up("c", 1, "c1")])
    tables.apply([delete("a", 2), delete("b", 2)])
    keys = expired_tombstones(spark, tables.state, tables.spec, 0)
    assert not runs_python_worker(keys)
    assert sorted(r.id for r in keys.collect()) == ["a", "b"]
    assert expired_tombstones(spark, tables.state, tables.spec, 3600).isEmpty()


def test_a_gc_pass_runs_only_when_a_tombstone_may_have_expired(tables, spark):
    """The GC pass reads the whole state table (Spark jobs) in every batch; the state log's
    file statistics tell when it cannot find anything: no tombstone at all (a ledger that
    never deletes), or none older than the retention."""
    sc = spark.sparkContext

    def jobs(rows, **options) -> int:
        group = f"gc-{tables.next_batch}"
        sc.setJobGroup(group, group)
        try:
            tables.apply(rows, **options)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        return len(sc.statusTracker().getJobIdsForGroup(group))

    tables.apply([up("a", 1, "v1")])
    kept = jobs([up("b", 1, "b1")])  # tombstones kept: no GC pass
    assert jobs([up("c", 1, "c1")], tombstone_gc_seconds=2 * 24 * 3600) == kept  # none at all
    tables.apply([delete("a", 2)], tombstone_gc_seconds=3600)
    assert jobs([up("d", 1, "d1")], tombstone_gc_seconds=3600) == kept  # one, an hour to go
    assert jobs([up("e", 1, "e1")], tombstone_gc_seconds=0) > kept  # expired: the pass runs
    state = spark.read.format("delta").load(tables.state)
    assert state.where("__is_delete").count() == 0, "and removed it"
    tables.apply([up("a", 1, "v1 again")])  # older than the forgotten delete: applied as new
    assert ("a", 1, "v1 again") in tables.rows()


def test_a_state_table_with_its_columns_is_checked_without_a_call_into_the_jvm(tables, spark):
    """Every update checks each AUTO CDC flow's state table before its batches. One that has
    its columns is checked from its log: no call into the JVM, where reading it through Delta
    and planning the state's schema cost a snapshot, two analyses and about 60 py4j calls."""
    tables.apply([up("a", 1, "v1")])
    source = spark.createDataFrame([], SCHEMA)
    with calls_into_the_jvm(spark) as calls:
        ensure_state_table(spark, tables.spec, source, tables.state)
    assert calls == []


def test_a_batch_s_plan_is_built_in_a_few_calls_into_the_jvm(spark, tmp_path):
    """Every micro-batch of an AUTO CDC flow builds its plan in the driver, through py4j. Its
    expressions are SQL text (engine/sql_columns.py), not a call per column, alias and list
    element: 150 calls for this source of 25 columns, as for one of 6 (475 before)."""
    calls = plan_calls_of_a_wide_batch(spark, scd1, make_spec(except_column_list=()), SCHEMA,
                                       ("a", 1, "upsert", "v", 0), tmp_path)
    assert calls["plan"] <= 200, calls


def test_a_state_table_written_before_tombstone_times_and_ties_gets_their_columns(spark, tmp_path):
    spec = make_spec()
    source = spark.createDataFrame([], SCHEMA)
    state = str(tmp_path / "state")
    full = state_schema(spec, source)
    spark.createDataFrame([], full).drop("__deleted_at", "__tie").write.format("delta").save(state)
    ensure_state_table(spark, spec, source, state)
    assert delta_log.column_names(state)[-2:] == ["__deleted_at", "__tie"]
    assert spark.read.format("delta").load(state).schema == as_written(full)


def test_a_batch_s_changes_read_only_its_own_keys_state(tables, spark, monkeypatch):
    """The state table holds every key the flow ever applied; a batch's changes need only its
    own keys' rows, which are kept as the state is read, before its aggregation: the rows the
    batch's "changes" step shuffles follow the batch (3 events), not the state (300 keys). So
    for a state of more rows than the limit (10,000; 100 here), below which reading the whole
    state measured no slower than broadcasting the batch's keys."""
    monkeypatch.setattr(changes, "KEYED_STATE_READ_MIN_ROWS", 100)
    tables.apply([up(f"k{i:03d}", 1, "v") for i in range(300)])
    shuffled = ShuffledRowsByStep(spark)
    stats = tables.apply([up("k007", 2, "w"), up("k008", 1, "stale"), up("new", 1, "n")],
                         step=shuffled.step)
    assert shuffled.rows["changes"] <= 10, shuffled.rows
    assert (stats.upserts, stats.stale) == (2, 1)
    rows = tables.rows()
    assert len(rows) == 301 and ("k007", 2, "w") in rows and ("k008", 1, "v") in rows \
        and ("new", 1, "n") in rows


def test_a_state_of_many_files_is_compacted_and_still_read_as_files(tables, spark):
    """Each batch appends a file to the state table; beyond the paths a read lists in the
    driver (Spark's 32; 4 here) `read_latest` would fall back to Delta's reader, its state
    rebuilt at every version. Past half of that the state's files are compacted into one
    (Delta's OPTIMIZE, no data change): the same rows, read as files, and the batches' markers
    still found for replays."""
    spark.conf.set(PATHS_LISTED_IN_DRIVER, "4")
    try:
        for i in range(2):
            tables.apply([up(f"k{i}", 1, f"v{i}")])
        assert not compact_when_many_files(spark, tables.state)  # 2 files: not yet
        tables.apply([up("k2", 1, "v2"), up("k3", 1, "v3"), up("k0", 0, "stale")])
        before = sorted(read_latest(spark, tables.state).collect())
        assert compact_when_many_files(spark, tables.state)
        assert len(delta_log.plain_parquet_files(tables.state)) == 1
        assert last_operation(tables.state) == "OPTIMIZE"
        state = read_latest(spark, tables.state)
        assert scan_of(state) == "paths" and sorted(state.collect()) == before
        replayed = tables.apply([up("k3", 1, "v3")], batch_id=2)  # its marker is still found
        assert replayed.upserts == 0 and last_operation(tables.state) == "OPTIMIZE"
        stats = tables.apply([up("k1", 0, "stale"), up("k4", 1, "v4")])
        assert (stats.stale, stats.upserts) == (1, 1)
        assert tables.rows() == [(f"k{i}", 1, f"v{i}") for i in range(5)]
    finally:
        spark.conf.unset(PATHS_LISTED_IN_DRIVER)


def test_the_state_is_read_as_the_parquet_files_its_log_names(tables, spark):
    """An empty state (every flow's first batch) as a local relation of the table's schema;
    then the files of the latest version as plain Parquet, not through Delta's scan (its state
    rebuilt from the log at each new version); the same rows as Delta's reader, also after the
    tombstone GC rewrote files; a table with deletion vectors is read by Delta."""
    def delta(path=tables.state):
        return spark.read.format("delta").load(path)

    empty = read_latest(spark, tables.state)
    assert empty.schema == delta().schema and scan_of(empty) == "none" and empty.count() == 0
    tables.apply([up("a", 1, "v1"), up("b", 1, "b1")])
    tables.apply([delete("a", 2)], tombstone_gc_seconds=3600)
    tables.apply([up("c", 1, "c1")])
    state = read_latest(spark, tables.state)
    assert scan_of(state) == "paths" and state.schema == delta().schema
    assert sorted(state.collect()) == sorted(delta().collect())
    tables.apply([up("d", 1, "d1")], tombstone_gc_seconds=0)  # the GC rewrites a's files
    state = read_latest(spark, tables.state)
    assert sorted(state.collect()) == sorted(delta().collect())
    assert delta().where("id = 'a'").count() == 0 and state.count() == 3

    tables.apply([up("e", 1, "e1"), up("f", 1, "f1")])  # one file of two rows
    spark.sql(f"ALTER TABLE delta.`{tables.state}` SET TBLPROPERTIES "
              "('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM delta.`{tables.state}` WHERE id = 'e'")  # a vector on that file
    state = read_latest(spark, tables.state)
    assert scan_of(state) == "delta"
    # The log's replay still counts the file (added with its vector, removed without).
    assert len(delta_log.live_file_stats(tables.state)) == len(delta().inputFiles())
    assert sorted(state.collect()) == sorted(delta().collect()) and state.count() == 4


def test_replaying_a_committed_batch_changes_nothing(tables, spark):
    tables.apply([up("a", 1, "v1")], batch_id=0)
    tables.apply([up("a", 2, "v2")], batch_id=1)
    versions = [spark.sql(f"DESCRIBE HISTORY delta.`{p}`").count()
                for p in (tables.target, tables.state)]
    tables.apply([up("a", 2, "v2")], batch_id=1)  # Structured Streaming replays after a crash
    assert tables.rows() == [("a", 2, "v2")]
    assert versions == [spark.sql(f"DESCRIBE HISTORY delta.`{p}`").count()
                        for p in (tables.target, tables.state)]


def test_a_crash_between_the_two_commits_recovers_on_replay(tables, monkeypatch):
    tables.apply([up("a", 1, "v1"), up("b", 1, "b1")], batch_id=0)
    batch = [delete("a", 2), up("b", 2, "b2")]
    with crash_after_target_commit(monkeypatch):
        tables.apply(batch, batch_id=1)
    tables.apply(batch, batch_id=1)  # the replay: target merge skipped, state merge applied
    tables.apply([up("a", 1, "stale")], batch_id=2)  # the tombstone from the replay holds
    assert tables.rows() == [("b", 2, "b2")]
