"""One update of an AUTO CDC FROM SNAPSHOT flow: snapshots asked for, checked, applied, recorded.

    latest = the version log's last version (None before the first snapshot, or after a full
             refresh)
    loop:  next_snapshot_and_version(latest) -> None: done (None on the very first call: error)
                                             -> (snapshot, version): check the shape, the
           version's order, the snapshot's columns, keys unique and not NULL; MERGE its changes
           into the target (append them to an empty one); record (version, counts) in the
           version log; latest = version

Each snapshot is applied (one MERGE, or none when nothing changed) before its version is
recorded, and the MERGE is computed against the target's current rows: a crash between the two
leaves a target that already reflects the snapshot, so the next update, asked for the same
snapshot again, finds nothing to change and records it. Nothing is applied twice or skipped.

A target with no snapshot recorded yet (new, or after a full refresh) takes every snapshot the
update has in one write instead (`first_snapshots`): they are applied one after the other to
rows kept in memory (`apply.applied_in_memory`, the rows each MERGE would leave), appended as
one commit marked with the last one's ordinal, then recorded. A first update over many exports
(a backfill, the sample's two) is one append, not an append and a MERGE per export; its
versions, counts and rows are those of snapshot-by-snapshot MERGEs (tests/
test_auto_cdc_snapshot.py). A crash between the append and the records is finished by the next
update from the append's mark (`first_snapshots`).

The table-or-view form is one snapshot per update (`one_snapshot`), versioned by the update's
processing time: Databricks' rule, a documented wall-clock policy (docs/auto_cdc.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from exactly_once.errors import SnapshotError
from exactly_once.local.auto_cdc.declaration import spelled_as_in
from exactly_once.local.auto_cdc.from_snapshot import versions
from exactly_once.local.auto_cdc.from_snapshot.apply import (
    applied_in_memory,
    current_rows,
    inserted_rows,
    merge_scd1,
    merge_scd2,
    scd2_operations,
    snapshot_part,
    target_schema,
)
from exactly_once.local.auto_cdc.from_snapshot.diff import (
    SnapshotCounts,
    data_columns,
    observed_counts,
    schema_mismatch,
    snapshot_changes,
)
from exactly_once.local.auto_cdc.from_snapshot.spec import NextSnapshot, SnapshotCdcSpec
from exactly_once.local.auto_cdc.from_snapshot.versions import AppliedSnapshot, shown
from exactly_once.local.auto_cdc.scd2 import START_AT
from exactly_once.local.engine.materialize import computed_once
from exactly_once.local.storage import delta_log, idempotent
from exactly_once.local.storage.delta_log import Marker
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.warehouse import Warehouse

# A named step of one snapshot (the update's timeline): (step, ordinal) -> context manager.
Step = Callable[[str, int], AbstractContextManager[object]]


def _no_step(name: str, ordinal: int) -> AbstractContextManager[object]:
    return nullcontext()


def _ignore(applied: AppliedSnapshot) -> None:
    pass


def _where(spec: SnapshotCdcSpec) -> str:
    return f"AUTO CDC FROM SNAPSHOT flow `{spec.name}`"


def asked(spec: SnapshotCdcSpec, latest: Any) -> str:
    """The call as messages show it: `next_players_export(datetime.date(2026, 11, 20))`."""
    if isinstance(spec.source, str):
        return f"the snapshot of `{spec.source}`"
    return f"{getattr(spec.source, '__name__', 'next_snapshot_and_version')}({latest!r})"


def processing_time() -> datetime:
    """Now, in UTC: the version of a table-or-view snapshot taken now."""
    return datetime.now(timezone.utc)


def table_snapshot(spark: SparkSession, table: str,
                   resolve: Callable[[str, bool], DataFrame | None]) -> DataFrame:
    """The table-or-view source read as a batch: a dataset of the pipeline as `resolve` reads
    it, else a table of the catalog."""
    snapshot = resolve(table, False)
    return spark.read.table(table) if snapshot is None else snapshot


def one_snapshot(snapshot: DataFrame, version: Any) -> NextSnapshot:
    """The table-or-view form: the table as it is now, once per update, at `version`."""
    given: list[bool] = []

    def next_snapshot(latest: Any) -> tuple[DataFrame, Any] | None:
        if given:
            return None
        given.append(True)
        return snapshot, version

    return next_snapshot


def check_shape(spec: SnapshotCdcSpec, latest: Any, result: object) -> tuple[DataFrame, Any]:
    """`result` is (DataFrame, version): a batch DataFrame and a version that is not None."""
    if (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], DataFrame)
            and result[1] is not None and not result[0].isStreaming):
        return result[0], result[1]
    if isinstance(result, tuple):
        got = f"a tuple of {', '.join(type(v).__name__ for v in result)}"
        if len(result) == 2 and isinstance(result[0], DataFrame) and result[0].isStreaming:
            got = "a streaming DataFrame"
    else:
        got = f"a {type(result).__name__}"
    raise SnapshotError(f"{_where(spec)}: {asked(spec, latest)} returned {got}; expected "
                        "(DataFrame, version), or None when there is no next snapshot")


def tracked_columns(spec: SnapshotCdcSpec, data: Sequence[str]) -> list[str]:
    """The columns whose change opens a new SCD2 version (default: every non-key column)."""
    if spec.stored_as_scd_type == 1:
        return []
    if spec.track_history_column_list is not None:
        return list(spec.track_history_column_list)
    excluded = set(spec.track_history_except_column_list or ())
    return [c for c in data if c not in excluded]


def snapshot_named(spec: SnapshotCdcSpec, columns: Sequence[str]) -> SnapshotCdcSpec:
    """`spec` with its keys and history column lists spelled as the snapshot spells them
    (`spelled_as_in`)."""
    return dataclasses.replace(
        spec, keys=spelled_as_in(spec.keys, columns) or (),
        track_history_column_list=spelled_as_in(spec.track_history_column_list, columns),
        track_history_except_column_list=spelled_as_in(spec.track_history_except_column_list,
                                                       columns))


def check_columns(spec: SnapshotCdcSpec, columns: Sequence[str]) -> None:
    """The keys and history column lists name columns of the snapshot (`snapshot_named`
    first)."""
    problems = []
    if missing := [k for k in spec.keys if k not in columns]:
        problems.append(f"keys {', '.join(missing)}")
    for arg in ("track_history_column_list", "track_history_except_column_list"):
        listed = getattr(spec, arg) or ()
        if unknown := [c for c in listed if c not in columns or c in spec.keys]:
            problems.append(f"{arg} {', '.join(unknown)}")
    if problems:
        raise SnapshotError(f"{_where(spec)}: {'; '.join(problems)} not among the snapshot's "
                            f"non-key columns (its columns: {', '.join(columns)})")


def _check_counts(spec: SnapshotCdcSpec, version: Any, counts: SnapshotCounts) -> None:
    at = f"{_where(spec)}: the snapshot at version {shown(version)}"
    if counts.null_key_rows:
        raise SnapshotError(f"{at} has {counts.null_key_rows} row(s) with a NULL key "
                            f"({', '.join(spec.keys)}); keys identify rows and are never NULL")
    if counts.duplicated_keys:
        others = counts.duplicated_keys - 1
        raise SnapshotError(
            f"{at} has the key ({counts.most_repeated_key}) {counts.most_repeated_times} times"
            f"{f' (and {others} other key(s) more than once)' if others else ''}; "
            "keys must be unique within a snapshot")


def _target(spark: SparkSession, spec: SnapshotCdcSpec, warehouse: Warehouse,
            snapshot: DataFrame, version: Any, ordinal: int, step: Step) -> tuple[str, DataFrame]:
    """The target's path and rows (created from `snapshot` if new), after checking that
    `snapshot` fits it. The caller checks `snapshot`'s columns first (`check_columns`)."""
    if not warehouse.has_table(spec.target):
        with step("create table", ordinal):
            warehouse.create_table(spark, spec.target, target_schema(
                snapshot.schema, spec.stored_as_scd_type, versions.spark_type(version)),
                properties=dict(spec.target_properties))
    path = str(warehouse.table_path(spec.target).resolve())
    # As the Parquet files its log names: a target without files (a new one) is an empty local
    # relation, compared with no scan (storage/snapshot_files.py).
    target = read_latest(spark, path)
    _check_fits(spec, snapshot, version, target.schema)
    return path, target


def _check_fits(spec: SnapshotCdcSpec, snapshot: DataFrame, version: Any,
                target: StructType) -> None:
    """`snapshot` and `version` fit the target's columns (`target`), or a SnapshotError."""
    version_type = versions.spark_type(version)
    mismatch = schema_mismatch(snapshot.schema, snapshot_part(target))
    if spec.stored_as_scd_type == 2 and target[START_AT].dataType != version_type:
        mismatch = (f"versions of type {version_type.simpleString()}, not "
                    f"{target[START_AT].dataType.simpleString()}")
    if mismatch:
        raise SnapshotError(f"{_where(spec)}: the snapshot at version {shown(version)} does not "
                            f"fit `{spec.target}`: {mismatch}; a full refresh of "
                            f"`{spec.target}` rebuilds it from the snapshots")


def _changes(spec: SnapshotCdcSpec, snapshot: DataFrame, rows: DataFrame, version: Any,
             ordinal: int, step: Step) -> tuple[DataFrame, AppliedSnapshot]:
    """`snapshot`'s changes against the target's `rows`, computed and checked; its counts."""
    observation = Observation()
    with step("changes", ordinal):
        # One job: the changes, kept in memory (the MERGE then reads them, not the target they
        # were compared with), with the snapshot's checks and counts observed on the way.
        changes = snapshot_changes(snapshot, current_rows(rows, spec.stored_as_scd_type),
                                   spec.keys, tracked_columns(
                                       spec, data_columns(snapshot.schema, spec.keys)),
                                   observation)
        changes = computed_once(changes)
    counts = observed_counts(observation)
    _check_counts(spec, version, counts)
    return changes, AppliedSnapshot(ordinal, version, counts.rows, counts.inserted,
                                    counts.updated, counts.deleted)


def _marker(spec: SnapshotCdcSpec, ordinal: int) -> Marker:
    """The commit mark of the target write that applied snapshots up to `ordinal`."""
    return Marker(f"snapshot:{spec.name}", ordinal)


def apply_snapshot(spark: SparkSession, spec: SnapshotCdcSpec, warehouse: Warehouse,
                   snapshot: DataFrame, version: Any, ordinal: int,
                   step: Step = _no_step, writer: SparkSession | None = None) -> AppliedSnapshot:
    """MERGE `snapshot`'s changes into the target (created from the first snapshot); what it
    changed. Nothing is written when nothing changed.

    `writer`: the session the MERGE runs in (default: a new one). Its commit's marker
    (`snapshot:<flow>`, the snapshot's ordinal) is a setting of that session, so it must not be
    the session other flows commit through at the same time.
    """
    spec = snapshot_named(spec, snapshot.columns)
    check_columns(spec, snapshot.columns)
    path, target = _target(spark, spec, warehouse, snapshot, version, ordinal, step)
    changes, applied = _changes(spec, snapshot, target, version, ordinal, step)
    data = data_columns(snapshot.schema, spec.keys)
    version_type = versions.spark_type(version)
    marker = _marker(spec, ordinal)
    # An empty target (its log says no rows: every key deleted in SCD1, say): every change is
    # an insert.
    if applied.changed and delta_log.row_count(path) == 0:
        with step("target append", ordinal):
            # The inserts as one append: a MERGE would scan and join a target with no rows.
            # As safe as the MERGE: a crash before the version's record leaves a target that
            # reflects the snapshot, so the same snapshot next time changes nothing.
            idempotent.append(inserted_rows(changes, target.schema, version, version_type),
                              path, marker, replayed=False)
    elif applied.changed:
        writer = writer or spark.newSession()
        if spec.stored_as_scd_type == 1:
            merge = merge_scd1(writer, path, changes, spec.keys, data)
        else:
            merge = merge_scd2(writer, path, scd2_operations(changes, spec.keys, data, version,
                                                             version_type),
                               spec.keys, data, version, version_type)
        with step("target merge", ordinal):
            # Always executed: computed from the target as it is, the MERGE of a snapshot the
            # target already reflects changes nothing (module docstring).
            idempotent.merge(writer, merge, path, marker, replayed=False)
    return applied


def _keeps_change_feed(spark: SparkSession, spec: SnapshotCdcSpec, warehouse: Warehouse,
                       path: str) -> bool:
    """Whether the target keeps Delta's change data feed (its property, else the declared one,
    else the session's default for new tables)."""
    key = "delta.enableChangeDataFeed"
    if warehouse.has_table(spec.target):
        value = delta_log.table_property(path, key)
    else:
        value = spec.target_properties.get(key) or spark.conf.get(
            f"spark.databricks.delta.properties.defaults.{key.removeprefix('delta.')}", None)
    return str(value).strip().lower() == "true"


def first_snapshots(spark: SparkSession, spec: SnapshotCdcSpec, next_snapshot: NextSnapshot,
                     warehouse: Warehouse, log: str, on_applied: Callable[[AppliedSnapshot], None],
                     step: Step) -> tuple[list[AppliedSnapshot], bool]:
    """A target with no snapshot recorded (new, or emptied by a full refresh): the snapshots
    `next_snapshot` has, applied one after the other to rows kept in memory, then written as
    one append, then recorded; the snapshots applied, and whether the source has no more.

    A crash after the append and before the records leaves a target whose last commit is
    marked with the last snapshot's ordinal: the next update applies the same snapshots in
    memory again up to that ordinal, writes nothing, records them, and goes on from there (a
    snapshot after them is then MERGEd). A snapshot that fails (its checks, or the function)
    first writes and records the ones before it, as snapshot-by-snapshot MERGEs would have.

    Not for a target that keeps a change data feed (`delta.enableChangeDataFeed`): its readers
    see each commit's changes, so each snapshot is its own commit there, as on Databricks
    (([], False): none applied, the source not asked)."""
    path = str(warehouse.table_path(spec.target).resolve())
    if _keeps_change_feed(spark, spec, warehouse, path):
        return [], False
    written = (delta_log.committed_batch(path, _marker(spec, 0).writer)
               if warehouse.has_table(spec.target) else None)
    applied: list[AppliedSnapshot] = []
    rows: DataFrame | None = None
    changed = False  # whether the last snapshot changed `rows`
    latest: Any = None

    def write_and_record() -> None:
        if rows is not None and applied and written is None \
                and any(a.changed for a in applied):
            with step("target append", applied[-1].ordinal):
                idempotent.append(rows, path, _marker(spec, applied[-1].ordinal),
                                  replayed=False)
        for done in applied:
            with step("record version", done.ordinal):
                versions.record(log, done)
            on_applied(done)

    try:
        while written is None or len(applied) <= written:
            ordinal = len(applied)
            with step("next snapshot", ordinal):
                result = next_snapshot(latest)
            if result is None:
                if not applied:
                    raise SnapshotError(f"{_where(spec)}: {asked(spec, None)} returned None: "
                                        "there is no first snapshot to apply; the flow needs one")
                if written is not None:
                    raise SnapshotError(
                        f"{_where(spec)}: `{spec.target}` holds {written + 1} snapshots, and "
                        f"{asked(spec, latest)} returned None after {len(applied)}; a full "
                        f"refresh of `{spec.target}` rebuilds it from the snapshots there are")
                break
            snapshot, version = check_shape(spec, latest, result)
            versions.check_next(spec.name, asked(spec, latest), version, latest)
            spec = snapshot_named(spec, snapshot.columns)
            check_columns(spec, snapshot.columns)
            if rows is None:  # the target's columns, from the first snapshot if it is new
                rows = _target(spark, spec, warehouse, snapshot, version, ordinal, step)[1] \
                    .where(F.lit(False))
            else:
                _check_fits(spec, snapshot, version, rows.schema)
                if changed:  # the rows the last snapshot left, computed once for this one
                    with step("apply in memory", ordinal - 1):
                        rows = computed_once(rows)
            changes, done = _changes(spec, snapshot, rows, version, ordinal, step)
            # The rows after it, as a plan: computed when a next snapshot compares with them,
            # else by the append.
            changed = done.changed > 0
            if changed:
                rows = applied_in_memory(rows, changes, spec.stored_as_scd_type, spec.keys,
                                         data_columns(snapshot.schema, spec.keys), version,
                                         versions.spark_type(version))
            applied.append(done)
            latest = version
    except Exception:
        write_and_record()
        raise
    write_and_record()
    return applied, written is None


def run_snapshots(spark: SparkSession, spec: SnapshotCdcSpec, next_snapshot: NextSnapshot,
                  warehouse: Warehouse, on_applied: Callable[[AppliedSnapshot], None] = _ignore,
                  step: Step = _no_step) -> list[AppliedSnapshot]:
    """Ask `next_snapshot` for snapshots after the log's latest version until it returns None,
    applying and recording each in turn; the snapshots applied."""
    log = warehouse.auto_cdc_tables(spec.target).state
    last = versions.latest(log)
    ordinal, latest = (last[0] + 1, last[1]) if last else (0, None)
    applied: list[AppliedSnapshot] = []
    if last is None:
        applied, finished = first_snapshots(spark, spec, next_snapshot, warehouse, log,
                                            on_applied, step)
        if finished:
            return applied
        if applied:
            ordinal, latest = applied[-1].ordinal + 1, applied[-1].version
    writer = spark.newSession()  # for the MERGEs' commit settings: other flows share `spark`
    while True:
        with step("next snapshot", ordinal):
            result = next_snapshot(latest)
        if result is None:
            if last is None and not applied:
                raise SnapshotError(f"{_where(spec)}: {asked(spec, None)} returned None: there "
                                    "is no first snapshot to apply; the flow needs one")
            return applied
        snapshot, version = check_shape(spec, latest, result)
        versions.check_next(spec.name, asked(spec, latest), version, latest)
        done = apply_snapshot(spark, spec, warehouse, snapshot, version, ordinal, step, writer)
        with step("record version", ordinal):
            versions.record(log, done)
        on_applied(done)
        applied.append(done)
        latest, ordinal = version, ordinal + 1
