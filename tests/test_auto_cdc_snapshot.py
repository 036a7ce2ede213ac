"""AUTO CDC FROM SNAPSHOT in the local runtime: pipeline files calling
`dp.create_auto_cdc_from_snapshot_flow`, run as updates (real Spark, real Delta).

The worked examples are Databricks' (docs/auto_cdc.md, "AUTO CDC FROM SNAPSHOT"): the same
snapshots in, the same tables out. Each pipeline here is one small file in a directory of its
own, so an update costs its snapshot flow and little else; tests that can share updates do.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import date, datetime, timezone
from pathlib import Path
from textwrap import dedent

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from exactly_once import cli
from exactly_once.errors import DeclarationError, FlowError, SnapshotError
from exactly_once.exports.players import PlayersExportConfig, daily_exports, write_player_exports
from exactly_once.local.auto_cdc.from_snapshot import versions as snapshot_versions
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.graph.loader import load_graph
from exactly_once.local.observe import event_log
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.paths import PIPELINES_DIR

SCHEMA = "Key INT, TrackingColumn STRING, NonTrackingColumn STRING"
# Databricks' "historical snapshot processing" example: two snapshots stored as files.
DOCS_SNAPSHOT_1 = [(1, "a1", "b1"), (2, "a2", "b2"), (4, "a4", "b4")]
DOCS_SNAPSHOT_2 = [(2, "a2_new", "b2"), (3, "a3", "b3"), (4, "a4", "b4_new")]
# ... and the target it documents, SCD2 tracking TrackingColumn: (Key, TrackingColumn,
# NonTrackingColumn, __START_AT, __END_AT).
SCD2_TRACKING = 'stored_as_scd_type=2, track_history_column_list=["TrackingColumn"]'
DOCS_SCD2_TARGET = [(1, "a1", "b1", 1, 2), (2, "a2", "b2", 1, 2), (2, "a2_new", "b2", 2, None),
                    (3, "a3", "b3", 2, None), (4, "a4", "b4_new", 1, None)]

# A function as Databricks' example writes it: the snapshot after `latest_snapshot_version`,
# read from `<version>.json` files; every call's argument is appended to calls.jsonl.
SNAPSHOT_FILES = '''
    import json, os
    from pyspark import pipelines as dp

    SNAPSHOTS = {snapshots!r}

    def next_snapshot_and_version(latest_snapshot_version):
        with open(os.path.join(SNAPSHOTS, "calls.jsonl"), "a") as calls:
            calls.write(json.dumps(latest_snapshot_version) + "\\n")
        versions = sorted(int(name[:-5]) for name in os.listdir(SNAPSHOTS)
                          if name.endswith(".json") and name[:-5].isdigit())
        later = [v for v in versions
                 if latest_snapshot_version is None or v > latest_snapshot_version]
        if not later:
            return None
        with open(os.path.join(SNAPSHOTS, f"{{later[0]}}.json")) as snapshot:
            rows = [tuple(row) for row in json.load(snapshot)]
        return spark.createDataFrame(rows, {schema!r}), later[0]

    dp.create_streaming_table("target")
    dp.create_auto_cdc_from_snapshot_flow(
        target="target", source=next_snapshot_and_version, keys=["Key"], {options})
'''


class SnapshotPipeline:
    """A one-file pipeline whose snapshot flow reads `<version>.json` files from a directory."""

    def __init__(self, spark, settings, root: Path, options: str, schema: str = SCHEMA,
                 source: str | None = None):
        self.spark, self.settings, self.root = spark, settings, root
        self.snapshots, self.files = root / "snapshots", root / "pipelines"
        self.warehouse = root / "warehouse"
        self.snapshots.mkdir(parents=True)
        self.files.mkdir()
        text = source or SNAPSHOT_FILES.format(snapshots=str(self.snapshots), schema=schema,
                                               options=options)
        (self.files / "target.py").write_text(dedent(text))

    def add(self, version: int, rows: list[tuple]) -> None:
        (self.snapshots / f"{version}.json").write_text(json.dumps(rows))

    def run(self, **kwargs):
        return run_pipeline(self.spark, self.settings, self.warehouse, pipelines_dir=self.files,
                            **kwargs)

    def calls(self) -> list:
        """The arguments the function was called with, and forget them."""
        path = self.snapshots / "calls.jsonl"
        found = [json.loads(line) for line in path.read_text().splitlines()]
        path.unlink()
        return found

    def table(self, version: int | None = None) -> list[tuple]:
        """The target's rows, sorted (as of a Delta version of it, if given)."""
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        df = reader.load(str(self.warehouse / "target"))
        return sorted((tuple(r) for r in df.collect()), key=repr)

    def snapshot_counts(self) -> list[list[tuple]]:
        """Per update, the snapshots the event log lists: (version, inserted, updated,
        deleted)."""
        rows = (event_log.read(self.spark, Warehouse(self.warehouse))
                .where((F.col("event_type") == "flow_progress")
                       & (F.col("origin.flow_name") == "target"))
                .orderBy("sequence.control_plane_seq_no").collect())
        return [[(s.version, s.rows_inserted, s.rows_updated, s.rows_deleted)
                 for s in r.details.flow_progress.snapshots or []] for r in rows]


# -- Databricks' worked examples -----------------------------------------------------------------
@pytest.fixture(scope="module")
def docs_scd2(spark, settings, tmp_path_factory):
    """The example as SCD2, then more updates of the same pipeline: (pipeline, what each
    step saw)."""
    pipeline = SnapshotPipeline(spark, settings, tmp_path_factory.mktemp("docs-scd2"),
                                SCD2_TRACKING)
    seen = {}
    pipeline.add(1, DOCS_SNAPSHOT_1)
    pipeline.add(2, DOCS_SNAPSHOT_2)
    pipeline.run()  # both snapshots in one update
    seen["first update"] = (pipeline.calls(), pipeline.table())
    pipeline.add(3, [])  # an empty snapshot: every key is gone
    pipeline.run()
    seen["second update"] = (pipeline.calls(), pipeline.table())
    pipeline.run(full_refresh=["target"])
    seen["full refresh"] = (pipeline.calls(), pipeline.table())
    return pipeline, seen


def test_docs_example_scd2_with_track_history_column_list(docs_scd2):
    _, seen = docs_scd2
    calls, table = seen["first update"]
    assert table == DOCS_SCD2_TARGET
    assert calls == [None, 1, 2]  # asked again and again, from each version committed


def test_several_snapshots_in_one_update_are_counted_each(docs_scd2):
    pipeline, _ = docs_scd2
    counts = pipeline.snapshot_counts()
    # Snapshot 2 against 1, by key: 3 is new, 2 and 4 changed, 1 is gone.
    assert counts[0] == [("1", 3, 0, 0), ("2", 1, 2, 1)]


def test_the_next_update_resumes_from_the_latest_version(docs_scd2):
    pipeline, seen = docs_scd2
    assert seen["second update"][0] == [2, 3]
    assert [entry["version"] for entry in snapshot_versions.recorded(
        Warehouse(pipeline.warehouse).auto_cdc_state_path("target"))] == ["1", "2", "3"]


def test_a_snapshot_that_deletes_everything_closes_every_version(docs_scd2):
    pipeline, seen = docs_scd2
    _, table = seen["second update"]
    assert table == [(1, "a1", "b1", 1, 2), (2, "a2", "b2", 1, 2), (2, "a2_new", "b2", 2, 3),
                     (3, "a3", "b3", 2, 3), (4, "a4", "b4_new", 1, 3)]
    assert pipeline.snapshot_counts()[1] == [("3", 0, 0, 3)]


def test_full_refresh_forgets_the_versions(docs_scd2):
    _, seen = docs_scd2
    calls, table = seen["full refresh"]
    assert calls == [None, 1, 2, 3]
    assert table == seen["second update"][1]


def test_docs_example_scd1(spark, settings, tmp_path):
    pipeline = SnapshotPipeline(spark, settings, tmp_path, "stored_as_scd_type=1")
    pipeline.add(1, DOCS_SNAPSHOT_1)
    pipeline.run()
    pipeline.add(2, DOCS_SNAPSHOT_2)
    pipeline.add(3, [])
    pipeline.run()
    # The documented rule: new keys inserted, changed rows updated, missing keys deleted. After
    # each snapshot's write (the target's Delta versions 1, 2 and 3: the first update's append,
    # the second's MERGEs) the table is that snapshot.
    assert pipeline.table(version=1) == DOCS_SNAPSHOT_1
    assert pipeline.table(version=2) == DOCS_SNAPSHOT_2
    assert pipeline.table() == []
    assert pipeline.snapshot_counts() == [[("1", 3, 0, 0)], [("2", 1, 2, 1), ("3", 0, 0, 3)]]


# -- a new target: its snapshots applied in memory, written once ----------------------------------
FOLDED = [  # (Key, TrackingColumn, NonTrackingColumn) per version: every kind of change
    [(1, "a", "x"), (2, "b", "y"), (3, "c", "z")],
    [(1, "a", "x2"), (2, "B", "y"), (4, "d", "w")],  # untracked, tracked, deleted 3, new 4
    [(1, "A", "x2"), (3, "c", "z3"), (4, "d", "w")],  # tracked; 2 deleted; 3 back
    [],  # every key deleted
    [(2, "b", None), (4, None, "w")],  # back, with NULLs
]


def test_snapshots_applied_in_memory_leave_the_rows_each_merge_leaves(spark, tmp_path):
    """SCD2: `applied_in_memory` against `merge_scd2` on a Delta table, snapshot after snapshot:
    the same rows after each. SCD1: the rows are each snapshot's, the documented rule."""
    from exactly_once.local.auto_cdc.from_snapshot import apply, diff

    def rows_of(df):
        return sorted((tuple(r) for r in df.collect()), key=repr)

    schema = spark.createDataFrame([], SCHEMA).schema
    path = str(tmp_path / "target")
    scd2 = spark.createDataFrame([], apply.target_schema(schema, 2, LongType()))
    scd2.write.format("delta").save(path)
    scd1 = spark.createDataFrame([], schema)
    data = ["TrackingColumn", "NonTrackingColumn"]
    for version, snapshot_rows in enumerate(FOLDED, start=1):
        snapshot = spark.createDataFrame(snapshot_rows, SCHEMA)
        changes = diff.snapshot_changes(snapshot, scd1, ["Key"], [], Observation())
        scd1 = apply.applied_in_memory(scd1, changes, 1, ["Key"], data, version, LongType()) \
            .localCheckpoint()
        assert rows_of(scd1) == sorted(snapshot_rows, key=repr), version
        table = spark.read.format("delta").load(path)
        changes = diff.snapshot_changes(snapshot, apply.current_rows(table, 2), ["Key"],
                                        ["TrackingColumn"], Observation()).localCheckpoint()
        apply.merge_scd2(spark, path, apply.scd2_operations(
            changes, ["Key"], data, version, LongType()), ["Key"], data, version,
            LongType()).execute()
        scd2 = apply.applied_in_memory(scd2, changes, 2, ["Key"], data, version,
                                       LongType()).localCheckpoint()
        assert rows_of(scd2) == rows_of(spark.read.format("delta").load(path)), version


# -- the table-or-view form: a snapshot per update at its processing time --------------------------
PERIODIC = """
    from pyspark import pipelines as dp

    @dp.materialized_view(name="mytable")
    def mytable():
        return spark.read.json({path!r}, schema="Key INT, Value STRING")

    dp.create_streaming_table("target")
    dp.create_auto_cdc_from_snapshot_flow(target="target", source="mytable", keys=["Key"],
                                          stored_as_scd_type=2)
"""


def test_a_table_is_snapshotted_once_per_update_at_its_processing_time(spark, settings,
                                                                        tmp_path):
    """Databricks' "periodic snapshot processing" example: the table at two moments, the
    versions the updates' processing times."""
    table = tmp_path / "mytable.json"
    pipeline = SnapshotPipeline(spark, settings, tmp_path,
                                "", source=PERIODIC.format(path=str(table)))
    moments = []
    for rows in ([(1, "a1"), (2, "a2")], [(2, "b2"), (3, "a3")]):
        table.write_text("".join(json.dumps({"Key": k, "Value": v}) + "\n" for k, v in rows))
        before = datetime.now(timezone.utc)
        pipeline.run()
        moments.append((before, datetime.now(timezone.utc)))
    log = snapshot_versions.recorded(Warehouse(pipeline.warehouse).auto_cdc_state_path("target"))
    assert [entry["version_type"] for entry in log] == ["timestamp", "timestamp"]
    first, second = (datetime.fromisoformat(entry["version"]) for entry in log)
    assert moments[0][0] <= first <= moments[0][1] < moments[1][0] <= second <= moments[1][1]
    def micros(moment: datetime) -> int:
        return round(moment.timestamp() * 1_000_000)

    target = spark.read.format("delta").load(str(pipeline.warehouse / "target")).select(
        "Key", "Value", F.unix_micros("__START_AT"), F.unix_micros("__END_AT"))
    assert sorted((tuple(r) for r in target.collect()), key=repr) == sorted([
        (1, "a1", micros(first), micros(second)), (2, "a2", micros(first), micros(second)),
        (2, "b2", micros(second), None), (3, "a3", micros(second), None)], key=repr)


# -- a crash between applying a snapshot and recording its version ------------------------------
def test_a_crash_after_the_merge_neither_applies_the_snapshot_twice_nor_skips_it(
        spark, settings, tmp_path, monkeypatch):
    pipeline = SnapshotPipeline(spark, settings, tmp_path,
                                SCD2_TRACKING)
    pipeline.add(1, DOCS_SNAPSHOT_1)
    pipeline.run()
    pipeline.add(2, DOCS_SNAPSHOT_2)
    record = snapshot_versions.record

    def killed_before_recording_the_second(state, applied):
        if applied.ordinal == 1:  # its MERGE committed; the process dies before the record
            raise RuntimeError("killed")
        record(state, applied)

    monkeypatch.setattr(snapshot_versions, "record", killed_before_recording_the_second)
    with pytest.raises(FlowError, match="killed"):
        pipeline.run()
    state = Warehouse(pipeline.warehouse).auto_cdc_state_path("target")
    assert snapshot_versions.latest(state) == (0, 1)
    assert pipeline.table() == DOCS_SCD2_TARGET  # snapshot 2 is in the target already
    monkeypatch.setattr(snapshot_versions, "record", record)
    pipeline.calls()
    pipeline.run()
    assert pipeline.calls() == [1, 2]  # asked for snapshot 2 again: not skipped
    assert pipeline.table() == DOCS_SCD2_TARGET
    # Not applied twice: it found nothing to change, and wrote nothing (the target's commits:
    # its creation, the first snapshot's append, the second's MERGE).
    assert pipeline.snapshot_counts()[-1] == [("2", 0, 0, 0)]
    assert delta_log.commit_info(pipeline.warehouse / "target", 2)["operation"] == "MERGE"
    assert delta_log.latest_version(pipeline.warehouse / "target") == 2
    assert snapshot_versions.latest(state) == (1, 2)


def test_a_new_target_s_snapshots_are_one_append_and_a_crash_after_it_is_finished_by_the_next_run(
        spark, settings, tmp_path, monkeypatch):
    """Into a new target every snapshot an update has is applied in memory, then written as one
    append (a WRITE commit, no MERGE to scan and join the target). Killed before their versions
    are recorded, the next run asks for them again, applies them in memory up to the append's
    mark, writes nothing, records them with what they changed, and MERGEs a snapshot that came
    since: the tables and the counts of a run that was not killed."""
    pipeline = SnapshotPipeline(spark, settings, tmp_path, SCD2_TRACKING)
    pipeline.add(1, DOCS_SNAPSHOT_1)
    pipeline.add(2, DOCS_SNAPSHOT_2)
    record = snapshot_versions.record

    def killed_before_recording_the_first(state, applied):
        if applied.ordinal == 0:
            raise RuntimeError("killed")
        record(state, applied)

    monkeypatch.setattr(snapshot_versions, "record", killed_before_recording_the_first)
    with pytest.raises(FlowError, match="killed"):
        pipeline.run()
    target = pipeline.warehouse / "target"
    assert delta_log.commit_info(target, 1)["operation"] == "WRITE"
    assert delta_log.latest_version(target) == 1
    assert pipeline.table() == DOCS_SCD2_TARGET
    assert snapshot_versions.latest(Warehouse(pipeline.warehouse).auto_cdc_state_path(
        "target")) is None
    monkeypatch.setattr(snapshot_versions, "record", record)
    pipeline.add(3, [])  # a snapshot after the killed run's
    pipeline.calls()
    pipeline.run()
    assert pipeline.calls() == [None, 1, 2, 3]  # snapshots 1 and 2 asked for again
    assert pipeline.snapshot_counts()[-1] == [("1", 3, 0, 0), ("2", 1, 2, 1), ("3", 0, 0, 3)]
    assert pipeline.table() == [(1, "a1", "b1", 1, 2), (2, "a2", "b2", 1, 2),
                                (2, "a2_new", "b2", 2, 3), (3, "a3", "b3", 2, 3),
                                (4, "a4", "b4_new", 1, 3)]
    assert delta_log.commit_info(target, 2)["operation"] == "MERGE"  # snapshot 3 alone
    assert delta_log.latest_version(target) == 2


def test_a_source_that_lost_snapshots_the_new_target_holds_is_one_line(spark, settings, tmp_path,
                                                                       monkeypatch):
    """Killed after a new target's append, then its second snapshot's file is gone: the next run
    cannot apply the snapshots the target already holds, and says so, writing nothing."""
    pipeline = SnapshotPipeline(spark, settings, tmp_path, SCD2_TRACKING)
    pipeline.add(1, DOCS_SNAPSHOT_1)
    pipeline.add(2, DOCS_SNAPSHOT_2)
    record = snapshot_versions.record

    def killed(state, applied):
        raise RuntimeError("killed")

    monkeypatch.setattr(snapshot_versions, "record", killed)
    with pytest.raises(FlowError, match="killed"):
        pipeline.run()
    monkeypatch.setattr(snapshot_versions, "record", record)
    (pipeline.snapshots / "2.json").unlink()
    with pytest.raises(FlowError, match=(
            r"`target` holds 2 snapshots, and next_snapshot_and_version\(1\) returned None "
            r"after 1; a full refresh of `target` rebuilds it from the snapshots there are")):
        pipeline.run()
    assert pipeline.table() == DOCS_SCD2_TARGET
    assert delta_log.latest_version(pipeline.warehouse / "target") == 1


def test_a_target_with_a_change_data_feed_commits_each_snapshot(spark, settings, tmp_path):
    """Readers of a change data feed see each commit's changes: a new target that keeps one
    takes its snapshots one commit each, as on Databricks (an append, then a MERGE)."""
    source = SNAPSHOT_FILES.format(snapshots=str(tmp_path / "snapshots"), schema=SCHEMA,
                                   options=SCD2_TRACKING).replace(
        'dp.create_streaming_table("target")',
        'dp.create_streaming_table("target", '
        'table_properties={"delta.enableChangeDataFeed": "true"})')
    pipeline = SnapshotPipeline(spark, settings, tmp_path, "", source=source)
    pipeline.add(1, DOCS_SNAPSHOT_1)
    pipeline.add(2, DOCS_SNAPSHOT_2)
    pipeline.run()
    target = pipeline.warehouse / "target"
    assert [delta_log.commit_info(target, v)["operation"] for v in (1, 2)] == ["WRITE", "MERGE"]
    assert pipeline.table() == DOCS_SCD2_TARGET
    changes = spark.read.format("delta").option("readChangeFeed", "true") \
        .option("startingVersion", 2).load(str(target))
    assert sorted((r.Key, r._change_type) for r in changes.collect()) == [
        (1, "update_postimage"), (1, "update_preimage"), (2, "insert"), (2, "update_postimage"),
        (2, "update_preimage"), (3, "insert"), (4, "update_postimage"), (4, "update_preimage")]
    assert pipeline.snapshot_counts() == [[("1", 3, 0, 0), ("2", 1, 2, 1)]]


# -- a source that breaks the contract: one line naming the flow ----------------------------------
CONTRACT = """
from pyspark import pipelines as dp

def next_snapshot_and_version(latest_snapshot_version):
    rows = [(1, "a"), (2, "b")]
{body}

dp.create_streaming_table("target")
dp.create_auto_cdc_from_snapshot_flow(target="target", source=next_snapshot_and_version,
                                      keys=["Key"])
"""
SNAPSHOT = 'spark.createDataFrame(rows, "Key INT, Value STRING")'


@pytest.mark.parametrize("body, message", [
    pytest.param(
        "    return None",
        "next_snapshot_and_version(None) returned None: there is no first snapshot to apply",
        id="None on the first call"),
    pytest.param(
        f"    return {SNAPSHOT}",
        "next_snapshot_and_version(None) returned a DataFrame; expected (DataFrame, version), "
        "or None when there is no next snapshot",
        id="a DataFrame alone"),
    pytest.param(
        f"    return {SNAPSHOT}, None, 1", "returned a tuple of DataFrame, NoneType, int",
        id="a tuple of three"),
    pytest.param(
        f"    return {SNAPSHOT}, 1.5",
        "next_snapshot_and_version(None) gave the version 1.5 (float); a version is an int, a "
        "str, a date or a datetime",
        id="a float version"),
    pytest.param(
        f"    return {SNAPSHOT}, 2 if latest_snapshot_version is None else 1",
        "next_snapshot_and_version(2) gave the version 1, older than the last applied version "
        "2; versions must increase strictly",
        id="an older version"),
    pytest.param(
        f"    return {SNAPSHOT}, 5",
        "next_snapshot_and_version(5) gave the version 5, equal to the last applied version 5",
        id="an equal version"),
    pytest.param(
        "    rows += [(2, 'c'), (3, 'd'), (3, 'e'), (3, 'f')]\n"
        f"    return {SNAPSHOT}, 1",
        "the snapshot at version 1 has the key (Key=3) 3 times (and 1 other key(s) more than "
        "once); keys must be unique within a snapshot",
        id="a key three times"),
    pytest.param(
        "    rows.append((None, 'c'))\n"
        f"    return {SNAPSHOT}, 1",
        "the snapshot at version 1 has 1 row(s) with a NULL key (Key)",
        id="a NULL key"),
])
def test_a_broken_contract_is_one_line_naming_the_flow(spark, settings, tmp_path, body,
                                                       message):
    source = CONTRACT.replace("{body}", body)
    pipeline = SnapshotPipeline(spark, settings, tmp_path, "", source=source)
    with pytest.raises(SnapshotError) as failure:
        pipeline.run()
    text = str(failure.value)
    assert "\n" not in text
    assert text.startswith("AUTO CDC FROM SNAPSHOT flow `target`: ")
    assert message in text


# -- the project's own: players_history from the daily players export ---------------------------
def scd2_of(days: list[tuple[date, list[dict[str, str]]]], key: str,
            tracked: tuple[str, ...]) -> list[tuple]:
    """SCD2 of daily snapshots, by the documented rule, in plain Python: the oracle."""
    current: dict[str, tuple[dict[str, str], date]] = {}
    closed = []
    for day, rows in days:
        today = {row[key]: row for row in rows}
        for k in [k for k in current if k not in today]:
            row, start = current.pop(k)
            closed.append((*row.values(), start, day))
        for k, row in today.items():
            if k not in current:
                current[k] = (row, day)
            elif any(current[k][0][c] != row[c] for c in tracked):
                closed.append((*current[k][0].values(), current[k][1], day))
                current[k] = (row, day)
            else:
                current[k] = (row, current[k][1])  # untracked changes update in place
    return sorted([*closed, *((*row.values(), start, None) for row, start in current.values())],
                  key=repr)


def test_players_history_is_the_history_of_the_export_files(spark, settings, tmp_path):
    """The project's pipeline file, unchanged, over generated exports: two updates (two days,
    then two more) give the SCD2 history the export files define, dated by their names."""
    exports, files = tmp_path / "exports", tmp_path / "pipelines"
    files.mkdir()
    shutil.copy(PIPELINES_DIR / "players_history.py", files)
    players = settings.export("players")
    settings = dataclasses.replace(settings, exports={
        "players": dataclasses.replace(players, path=str(exports))})
    config = PlayersExportConfig(players=20, days=4, seed=11)
    write_player_exports(exports, dataclasses.replace(config, days=2))
    run_pipeline(spark, settings, tmp_path / "warehouse", pipelines_dir=files)
    write_player_exports(exports, config)  # two more days (the first two rewritten the same)
    run_pipeline(spark, settings, tmp_path / "warehouse", pipelines_dir=files)
    history = spark.read.format("delta").load(str(tmp_path / "warehouse" / "players_history"))
    assert history.schema["__START_AT"].dataType.simpleString() == "date"
    assert sorted((tuple(r) for r in history.collect()), key=repr) == scd2_of(
        daily_exports(config), players.key, players.track_history)


# -- dry-run and graph ---------------------------------------------------------------------------
def test_graph_and_dry_run_show_the_snapshot_flow(in_session, settings, tmp_path, capsys):
    pipeline = SnapshotPipeline(in_session, settings, tmp_path,
                                SCD2_TRACKING)
    pipeline.add(1, DOCS_SNAPSHOT_1)
    assert cli.main(["graph", "--pipelines", str(pipeline.files)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "flowchart LR",
        '  target["target<br/><i>streaming table</i>"]',
        '  target_source(("next_snapshot_and_version()")) -->|AUTO CDC FROM SNAPSHOT SCD2| '
        "target",
    ]
    assert cli.main(["dry-run", "--pipelines", str(pipeline.files)]) == 0
    out = capsys.readouterr().out
    assert "flow target" in out and "AUTO CDC FROM SNAPSHOT SCD2" in out
    assert "snapshots of next_snapshot_and_version()" in out
    assert not (pipeline.warehouse / "target").exists()  # nothing written


def test_dry_run_reports_what_an_update_would_fail_on(in_session, settings, tmp_path, capsys):
    pipeline = SnapshotPipeline(in_session, settings, tmp_path,
                                'stored_as_scd_type=2, track_history_column_list=["Tracking"]')
    assert cli.main(["dry-run", "--pipelines", str(pipeline.files)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"exactly-once: error: {pipeline.files / 'target.py'}: dataset `target`: AUTO CDC FROM "
        "SNAPSHOT flow `target`: next_snapshot_and_version(None) returned None: there is no "
        "first snapshot, and an update would fail"]
    pipeline.add(1, DOCS_SNAPSHOT_1)
    assert cli.main(["dry-run", "--pipelines", str(pipeline.files)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"exactly-once: error: {pipeline.files / 'target.py'}: dataset `target`: AUTO CDC FROM "
        "SNAPSHOT flow `target`: track_history_column_list Tracking not among the snapshot's "
        "non-key columns (its columns: Key, TrackingColumn, NonTrackingColumn)"]


# -- the declaration ----------------------------------------------------------------------------
FLOW_INTO = """
from pyspark import pipelines as dp

def snapshots(latest):
    return None

{target}
dp.create_auto_cdc_from_snapshot_flow(target="target", source={source}, keys=["Key"]{options})
"""


@pytest.mark.parametrize("target, source, options, error", [
    pytest.param('@dp.materialized_view(name="target")\ndef target():\n    return spark.range(1)\n',
                 "snapshots", "", "AUTO CDC FROM SNAPSHOT target `target` must be a streaming "
                 "table (dp.create_streaming_table)", id="into a materialized view"),
    pytest.param('dp.create_streaming_table("target")\n'
                 '@dp.append_flow(target="target", name="more")\n'
                 'def more():\n    return spark.readStream.format("rate").load()\n',
                 "snapshots", "", "AUTO CDC FROM SNAPSHOT flow `target` must be the only flow "
                 "into `target`; `more` also write(s) it", id="beside another flow"),
    pytest.param('dp.create_streaming_table("target")', "42", "",
                 "create_auto_cdc_from_snapshot_flow: source must be the name of a table or "
                 "view, or a function "
                 "next_snapshot_and_version(latest_version); got 42", id="a source of no kind"),
    pytest.param('dp.create_streaming_table("target")', "snapshots",
                 ', track_history_column_list=["v"]',
                 "create_auto_cdc_from_snapshot_flow: track_history_column_list / "
                 "track_history_except_column_list need stored_as_scd_type=2",
                 id="history columns of SCD1"),
])
def test_a_wrong_declaration_fails_the_load(spark, tmp_path, target, source, options, error):
    (tmp_path / "target.py").write_text(FLOW_INTO.format(target=target, source=source,
                                                         options=options))
    with pytest.raises(DeclarationError) as failure:
        load_graph(spark, [tmp_path / "target.py"])
    assert str(failure.value) == f"{tmp_path / 'target.py'}: dataset `target`: {error}"
