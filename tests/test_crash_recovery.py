"""A run killed while creating a table leaves it half-created; the next run completes it.

Delta creates `_delta_log/` (and `_delta_log/_staged_commits/`) before it writes a table's first
commit, Spark creates a checkpoint's directories before its `metadata` file: a process killed in
between leaves a directory with no committed version. These tests build exactly those on-disk
states, for every kind of table the runtime creates (append table, AUTO CDC target and its state
or journal, materialized view, event log, checkpoint), and require a normal run to end with the
tables of an uninterrupted run. `test_crash_sweep.py` reaches the same states by SIGKILLing real
runs.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from crash_points import contents, write_tiny_dump

from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.storage.delta_log import log_dir
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.settings.pipeline import load_settings


def settings_for(dump: Path):
    return load_settings("local", overrides={"exactly_once.source": f"file:{dump}"})


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    return write_tiny_dump(tmp_path_factory.mktemp("crash-recovery") / "stream.jsonl")


@pytest.fixture(scope="module")
def reference(spark, dump, tmp_path_factory) -> tuple[Path, dict[str, int]]:
    warehouse = tmp_path_factory.mktemp("crash-recovery") / "reference"
    result = run_pipeline(spark, settings_for(dump), warehouse)
    return warehouse, result.table_rows


def half_created_table(path: Path, stray_data: bool = False) -> None:
    """What a kill leaves while Delta creates the table at `path`: the log's directories, a
    commit still being written to its temporary file, maybe data files of the first write."""
    (log_dir(path) / "_staged_commits").mkdir(parents=True)
    (log_dir(path) / f".{0:020d}.json.{uuid.uuid4()}.tmp").write_text('{"commitInfo":')
    if stray_data:
        (path / f"part-00000-{uuid.uuid4()}-c000.snappy.parquet").write_bytes(b"PAR1")


def created_only(source: Path, path: Path) -> None:
    """The table at `source` as it was right after its creation: its version 0 only."""
    log_dir(path).mkdir(parents=True)
    shutil.copy(log_dir(source) / f"{0:020d}.json", log_dir(path))


def half_created_checkpoint(path: Path) -> None:
    """A streaming checkpoint whose query was killed while starting: no `metadata` yet."""
    for name in ("offsets", "commits"):
        (path / name).mkdir(parents=True)
    (path / f".metadata.{uuid.uuid4()}.tmp").write_text("")


def test_a_run_after_kills_during_table_creation_recreates_the_tables(spark, dump, reference,
                                                                      tmp_path):
    reference_path, reference_rows = reference
    warehouse = Warehouse(tmp_path / "crashed")
    # Each kind of table the runtime creates, as a kill while creating it leaves it.
    half_created_table(warehouse.table_path("bronze_kafka_events"))  # append (streaming table)
    half_created_checkpoint(warehouse.checkpoint_path("bronze_kafka_events"))
    half_created_table(warehouse.table_path("orders"))  # AUTO CDC target (SCD1)
    half_created_table(warehouse.auto_cdc_state_path("orders"))  # ... and its key state
    # AUTO CDC target created, its state (SCD1 tombstones / SCD2 journal) killed mid-creation.
    created_only(reference_path / "late_events", warehouse.table_path("late_events"))
    half_created_table(warehouse.auto_cdc_state_path("late_events"))
    created_only(reference_path / "orders_history", warehouse.table_path("orders_history"))
    half_created_table(warehouse.auto_cdc_state_path("orders_history"))
    half_created_table(warehouse.table_path("player_xp"), stray_data=True)  # materialized view
    half_created_table(warehouse.event_log_path())

    result = run_pipeline(spark, settings_for(dump), warehouse.root)

    assert contents(spark, warehouse.root) == contents(spark, reference_path)
    assert result.table_rows == reference_rows
    events = spark.read.format("delta").load(str(warehouse.event_log_path()))
    assert events.where("event_type = 'flow_progress'").count() == len(result.flows)


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (not an Exception, so nothing handles it)."""


def test_a_full_refresh_cut_short_is_finished_by_the_next_run(spark, dump, reference, tmp_path,
                                                               monkeypatch):
    """The reset deletes a table, then its AUTO CDC state and checkpoints, one after the other.
    Cut after the first deletion, a plain next run would find the table gone and its
    checkpoint saying everything was read: the table would come back empty."""
    from exactly_once.local.storage import files as files_module

    warehouse = tmp_path / "warehouse"
    run_pipeline(spark, settings_for(dump), warehouse)
    deleted: list[Path] = []
    rmtree = shutil.rmtree

    def rmtree_then_die(path, *args, **kwargs):
        if deleted:
            raise Killed
        deleted.append(Path(path))
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(files_module.shutil, "rmtree", rmtree_then_die)
    with pytest.raises(Killed):
        run_pipeline(spark, settings_for(dump), warehouse, full_refresh=["silver_orders"])
    monkeypatch.undo()
    assert deleted == [warehouse / "silver_orders"] and not deleted[0].exists()
    assert (Warehouse(warehouse).checkpoint_path("silver_orders") / "commits").is_dir()
    run_pipeline(spark, settings_for(dump), warehouse)  # a plain run, no --full-refresh
    assert contents(spark, warehouse) == contents(spark, reference[0])
    assert not Warehouse(warehouse).unfinished_reset()
