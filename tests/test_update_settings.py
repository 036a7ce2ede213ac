"""The session settings an update runs with (engine/update_settings.py): interpreted
expressions while it runs, generated code for a micro-batch that reads a mebibyte or more,
and a state snapshot when one is due; the session's own settings back once it ends, also
when updates overlap or one fails."""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.engine import update_settings
from exactly_once.local.engine.update_settings import (
    CHANGELOG_CHECKPOINTING,
    FACTORY_MODE,
    GENERATED_CODE_FROM_BYTES,
    MIN_DELTAS_FOR_SNAPSHOT,
    applied,
    batch_expressions,
    compiled_classes,
    for_update,
    input_bytes,
)
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe.timeline import Timeline
from exactly_once.local.storage.files import location
from exactly_once.local.storage.snapshot_files import read_latest
from exactly_once.local.storage.state_store import versions_since_snapshot
from exactly_once.local.storage.warehouse import Warehouse


def mode(spark) -> str | None:
    return spark.conf.get(FACTORY_MODE, None)


def test_an_update_s_expressions_are_interpreted_and_the_user_s_setting_comes_back(spark):
    spark.conf.set(FACTORY_MODE, "CODEGEN_ONLY")  # a user's own choice, kept
    try:
        with applied(spark, for_update()):
            assert mode(spark) == "NO_CODEGEN"
        assert mode(spark) == "CODEGEN_ONLY"
    finally:
        spark.conf.unset(FACTORY_MODE)
    with applied(spark, for_update(snapshot_state=True)):
        assert mode(spark) == "NO_CODEGEN"
        assert spark.conf.get(CHANGELOG_CHECKPOINTING) == "false"
    assert spark.conf.get(FACTORY_MODE) == "FALLBACK"  # Spark's default, as before
    assert spark.conf.get(CHANGELOG_CHECKPOINTING) == "true"  # the session's own


def test_overlapping_updates_restore_once_the_last_one_ends(spark):
    """Two updates of different warehouses in one session: the first to end must not give the
    other compiled expressions, nor the last leave the session interpreted."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[str | None] = []

    def first() -> None:
        with applied(spark, for_update()):
            first_in.set()
            second_in.wait(30)
        first_out.set()

    def second() -> None:
        first_in.wait(30)
        with applied(spark, for_update()):
            second_in.set()
            first_out.wait(30)
            seen.append(mode(spark))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == ["NO_CODEGEN"]
    assert mode(spark) is None


def test_a_failing_update_restores_the_settings(spark):
    with pytest.raises(RuntimeError), applied(spark, for_update(snapshot_state=True)):
        raise RuntimeError("a flow failed")
    assert mode(spark) is None
    assert spark.conf.get(CHANGELOG_CHECKPOINTING) == "true"


def test_interpreted_queries_compile_no_class(spark):
    """What `run --profile` counts: Janino compilations in the JVM."""
    query = spark.range(7).selectExpr("id * 3 + 11 AS x", "concat('k', id) AS k").where("x > 1")
    with applied(spark, for_update()):
        before = compiled_classes(spark)
        assert len(query.collect()) == 7
        assert compiled_classes(spark) == before
    before = compiled_classes(spark)
    spark.range(5).selectExpr("id * 5 + 13 AS y", "concat('q', id) AS q").collect()
    assert compiled_classes(spark) > before  # the counter counts


def test_versions_since_snapshot_read_from_the_state_files(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    assert versions_since_snapshot(checkpoint) == 0  # no state at all
    store = checkpoint / "state" / "0" / "0"
    store.mkdir(parents=True)
    for name in ("1.changelog", "2.changelog", ".2.changelog.crc", "_metadata"):
        (store / name).write_text("")
    assert versions_since_snapshot(checkpoint) == 2  # never snapshotted: every version
    (store / "3.zip").write_text("")
    (store / "4.changelog").write_text("")
    assert versions_since_snapshot(checkpoint) == 1
    # The most behind of the stores counts; checkpoint format 2 names files <version>_<id>.
    other = checkpoint / "state" / "0" / "1" / "left-keyToNumValues"
    other.mkdir(parents=True)
    for name in ("3_ab12.zip", "4_cd34.changelog", "5_ef56.changelog", "6_0a1b.changelog"):
        (other / name).write_text("")
    assert versions_since_snapshot(checkpoint) == 3


def test_an_update_snapshots_state_stores_that_went_long_without_one(spark, settings,
                                                                      tmp_path):
    """Each update is a new run of every query, too short for Spark's background maintenance
    to write a snapshot: without the update's own, stores replay every changelog ever."""
    dumps, warehouse = tmp_path / "dumps", tmp_path / "warehouse"
    dumps.mkdir()
    stores = Warehouse(location(warehouse)).checkpoint_path("silver_orders") / "state"
    try:
        for day in (1, 2, 3):
            # Spark's background maintenance (every 60 s, on whatever store is still loaded)
            # snapshots a store with this many deltas at a moment of its own: once in a clean-
            # clone run it wrote 2.zip after update 2. 10 keeps updates 1-2 to changelogs; 2
            # makes update 3 find its stores 2 versions behind.
            spark.conf.set(MIN_DELTAS_FOR_SNAPSHOT, "2" if day == 3 else "10")
            write_kcat_jsonl(dumps / f"stream-{day}.jsonl", generate_stream(GeneratorConfig(
                events=30, orders=6, players=3, seed=day,
                start=datetime(2026, 11, day, tzinfo=timezone.utc))))
            run_pipeline(spark, replace(settings, source=f"file:{dumps}"), warehouse)
            snapshots = sorted(p.name for p in stores.rglob("*.zip"))
            if day < 3:  # changelogs only: a load replays them
                assert snapshots == [], snapshots
    finally:
        spark.conf.unset(MIN_DELTAS_FOR_SNAPSHOT)
    # Updates 1 and 2 committed changelogs only (a batch with data, then the batch without data
    # that moves silver's watermark); update 3 wrote a snapshot of every store, at its newest
    # version.
    partitions = {p.parent for p in stores.rglob("*.changelog")}
    newest = {d: max(int(f.stem) for f in d.iterdir() if f.suffix in (".changelog", ".zip"))
              for d in partitions}
    assert partitions and all((d / f"{v}.zip").is_file() for d, v in newest.items()), newest
    assert versions_since_snapshot(stores.parent) == 0
    assert spark.conf.get(CHANGELOG_CHECKPOINTING) == "true"


def test_a_pipeline_s_generated_classes_are_compiled_once_per_session(spark, settings,
                                                                      tmp_path):
    """Some of Spark's paths generate code even when expressions are interpreted (Delta's
    statistics of each written file, encoders, projections that call a generator directly).
    An update of the pipeline asks Spark's cache of generated classes for more classes than
    its default 100 entries keep, so each update compiled the same two dozen classes again."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    write_kcat_jsonl(dumps / "stream.jsonl", generate_stream(GeneratorConfig(
        events=20, orders=4, players=2, seed=7,
        start=datetime(2026, 11, 1, tzinfo=timezone.utc))))
    source = replace(settings, source=f"file:{dumps}")
    run_pipeline(spark, source, tmp_path / "first")
    before = compiled_classes(spark)
    run_pipeline(spark, source, tmp_path / "second")  # a new warehouse, the same classes
    assert compiled_classes(spark) - before == 0


def test_a_micro_batch_of_megabytes_runs_generated_code_and_the_next_small_one_not(spark,
                                                                                  tmp_path):
    """Interpreted expressions cost per row what generated code costs per query: a batch that
    reads GENERATED_CODE_FROM_BYTES or more runs its tasks' expressions as generated code in
    its query's session, the next smaller batch of the same query interpreted again."""
    table = str(tmp_path / "table")
    # Hashes do not compress: each commit is one file, the first over the threshold.
    spark.range(300_000).selectExpr("sha2(CAST(id AS STRING), 256) AS h") \
        .coalesce(1).write.format("delta").save(table)
    spark.range(10).selectExpr("sha2(CAST(id AS STRING), 256) AS h") \
        .coalesce(1).write.format("delta").mode("append").save(table)
    seen = []

    def each_batch(batch, batch_id: int) -> None:
        with batch_expressions(batch) as generated:
            # An expression no query has had: compiled only if the tasks generate code.
            unique = batch.selectExpr(f"concat(h, '{uuid.uuid4()}') AS k").where("k IS NOT NULL")
            before = compiled_classes(spark)
            unique.count()
            seen.append((batch_id, input_bytes(batch) >= GENERATED_CODE_FROM_BYTES, generated,
                         batch.sparkSession.conf.get(FACTORY_MODE, None),
                         compiled_classes(spark) > before))

    with applied(spark, for_update()):
        spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(table) \
            .writeStream.foreachBatch(each_batch).trigger(availableNow=True) \
            .option("checkpointLocation", str(tmp_path / "checkpoint")).start() \
            .awaitTermination(120)
        assert mode(spark) == "NO_CODEGEN"  # the update's own session is left as it was
    assert seen == [(0, True, True, "FALLBACK", True), (1, False, False, "NO_CODEGEN", False)]


def test_an_update_with_every_micro_batch_in_generated_code_gives_the_same_gold(
        spark, settings, tmp_path, monkeypatch):
    """Only the cost moves: the same log gives the same tables whichever way a batch's
    expressions run."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    write_kcat_jsonl(dumps / "stream.jsonl", generate_stream(GeneratorConfig(
        events=40, orders=6, players=3, seed=11, duplicate_rate=0.2, malformed_rate=0.05,
        start=datetime(2026, 11, 2, tzinfo=timezone.utc))))
    source = replace(settings, source=f"file:{dumps}")
    run_pipeline(spark, source, tmp_path / "interpreted")
    monkeypatch.setattr(update_settings, "GENERATED_CODE_FROM_BYTES", 0)
    timeline = Timeline()
    run_pipeline(spark, source, tmp_path / "generated", timeline=timeline)
    batches = [s for s in timeline.spans if s.phase == "foreachBatch"]
    assert batches and all(s.detail == "generated code" for s in batches)

    def rows(warehouse: str, name: str) -> list[tuple]:  # without the times of processing
        return sorted(map(tuple, read_latest(spark, str(tmp_path / warehouse / name))
                          .drop("ingested_at", "quarantined_at").collect()))

    for name in ("silver_orders", "quarantine", "orders", "orders_history", "player_xp_ledger",
                 "player_xp", "late_events"):
        assert rows("generated", name) == rows("interpreted", name), name


def test_a_batch_whose_source_gives_no_estimate_stays_interpreted(spark, tmp_path):
    """A Kafka batch's size is unknown to Spark (its default, past any file's): interpreted, as
    a small batch. The rate source gives no statistics either."""
    seen = []

    def each_batch(batch, batch_id: int) -> None:
        with batch_expressions(batch) as generated:
            seen.append((input_bytes(batch) > GENERATED_CODE_FROM_BYTES, generated,
                         batch.count()))

    with applied(spark, for_update()):
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load() \
            .writeStream.foreachBatch(each_batch).trigger(availableNow=True) \
            .option("checkpointLocation", str(tmp_path / "checkpoint")).start() \
            .awaitTermination(60)
    assert seen == [(True, False, 10)]
