"""A bundle's pipeline on a throwaway warehouse and catalog, driven by a test.

    pipeline.given("samples.nyctaxi.trips", [{"fare_amount": 8.0, ...}])   # a table's rows
    pipeline.given("/Volumes/main/raw/landing/events", [{"id": 1}])       # a file in a folder
    pipeline.given("orders", [{"key": "o1", "payload": {...}}])           # Kafka records
    counts = pipeline.update()                                             # one update
    assert_table(pipeline.table("fares_by_zip"), [{"pickup_zip": 10103, "total_fare": 8.0}])
    pipeline.expectations("taxi_trips")   # {"valid_distance": {"passed": 5, "failed": 1, ...}}

A table's `given` rows are what it holds from then on (a later `given` replaces them, as a
changed fixture file does); a folder's and a topic's are added, as files land and records are
published. Updates can be repeated: what an incremental pipeline does with the second batch is
what tests are for.

Each harness has its own warehouse and catalog (under the test's tmp_path); the bundle's
`fixtures/` seed the catalog as they do for `exactly-once run`. Kafka topics are read from kcat
dumps in the harness's folder (`file:` source), for a bundle with this project's conf/.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import FixtureError
from exactly_once.kafka.kcat import KafkaRecord, write_kcat_jsonl
from exactly_once.local.catalog import fixtures
from exactly_once.local.catalog.catalog import LocalCatalog
from exactly_once.local.catalog.names import TableName
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.observe.progress import UpdateResult
from exactly_once.workspace.pipelines import LocalPipeline

FLOW_COUNTS = ("input_rows", "output_rows", "batches", "duplicates_dropped",
               "late_rows_dropped", "cdc_stale", "cdc_rejected", "dropped_records")


class PipelineHarness:
    def __init__(self, spark: SparkSession, pipeline: LocalPipeline, folder: Path,
                 warehouse: Path | None = None, fixtures_seeded_in: Path | None = None):
        """`folder`: the harness's own (its warehouse, catalog, given files and records);
        `warehouse`: another place for the warehouse; `fixtures_seeded_in`: a folder where the
        bundle's fixture tables are seeded once for every harness that names it (a session's)."""
        self.spark = spark
        self.folder = folder
        self.warehouse = warehouse or folder / "warehouse"
        self._topics = folder / "topics"  # kcat dumps: a `file:` source
        self._given: set[TableName] = set()
        self._offsets: dict[tuple[str, int], int] = {}
        self._dumps = 0
        settings = pipeline.settings
        if settings is not None:
            settings = dataclasses.replace(settings, source=f"file:{self._topics}")
        self.pipeline = dataclasses.replace(
            pipeline, settings=settings, warehouse=self.warehouse,
            catalog=LocalCatalog(folder / "catalog", pipeline.catalog.fixtures,
                                 seeded_in=fixtures_seeded_in))
        self.last: UpdateResult | None = None
        self._loaded: PipelineGraph | None = None

    # -- inputs ---------------------------------------------------------------------------------
    def given(self, name: str, rows: Iterable[Mapping[str, Any]] | DataFrame) -> None:
        """Rows for what the pipeline reads: a table (its rows from now on), a folder (a new
        file of them: `/Volumes/...` or a directory path), or a Kafka topic of the project's
        settings (kcat records: `key`, `payload` (text or an object), optional `partition`,
        `ts`, `headers`; offsets follow the topic's last)."""
        if name.startswith("/") or name.startswith("file:"):
            self._given_files(name, rows)
        elif self._topic(name) is not None:
            self._given_records(name, rows)
        else:
            self._given_table(name, rows)

    def _given_table(self, name: str, rows: Iterable[Mapping[str, Any]] | DataFrame) -> None:
        scope = self.pipeline.scope
        table = scope.table(name)
        if table is None:
            raise FixtureError(f"given `{name}`: not a table name of one to three parts")
        own = scope.namespace.dataset_key(table)
        if own in self._datasets():
            raise FixtureError(f"given `{name}`: the pipeline defines `{own}`; give the tables "
                               f"it reads (or test the dataset alone: pipeline.dataset(...))")
        df = rows if isinstance(rows, DataFrame) else self._frame(rows, f"{table.file_stem}")
        catalog = self.pipeline.catalog
        shutil.rmtree(catalog.entry(table), ignore_errors=True)  # a seeded fixture's pointer
        df.write.format("delta").mode("overwrite").option("overwriteSchema", True) \
            .save(str(catalog.entry(table)))
        self._given.add(table)
        self.pipeline = dataclasses.replace(
            self.pipeline, catalog=dataclasses.replace(catalog, given=frozenset(self._given)))

    def _given_files(self, path: str, rows: Iterable[Mapping[str, Any]] | DataFrame) -> None:
        folder = Path(self.pipeline.catalog.volume_path(path.removeprefix("file:")))
        folder.mkdir(parents=True, exist_ok=True)
        self._dumps += 1
        target = folder / f"given-{self._dumps:04d}.json"
        lines = [json.dumps(r, default=fixtures.json_value) for r in self._dicts(rows)]
        target.write_text("".join(line + "\n" for line in lines))

    def _given_records(self, name: str, rows: Iterable[Mapping[str, Any]] | DataFrame) -> None:
        topic = self._topic(name)
        assert topic is not None
        records = []
        for row in self._dicts(rows):
            partition = int(row.get("partition", 0))
            offset = self._offsets.get((topic, partition), -1) + 1
            self._offsets[(topic, partition)] = offset
            payload = row.get("payload")
            records.append(KafkaRecord(
                topic=topic, key=row.get("key"),
                payload=payload if payload is None or isinstance(payload, str)
                else json.dumps(payload, default=fixtures.json_value),
                partition=partition, offset=offset, timestamp_ms=row.get("ts"),
                headers=tuple((k, v) for k, v in (row.get("headers") or {}).items())))
        self._topics.mkdir(parents=True, exist_ok=True)
        self._dumps += 1
        write_kcat_jsonl(self._topics / f"given-{self._dumps:04d}.jsonl", records)

    def _topic(self, name: str) -> str | None:
        """The Kafka topic `name` names (a topic of conf/, by its name or its Kafka name)."""
        settings = self.pipeline.settings
        if settings is None:
            return None
        for key, topic in settings.topics.items():
            if name in (key, topic.kafka_topic):
                return topic.kafka_topic
        return None

    def _frame(self, rows: Iterable[Mapping[str, Any]], stem: str) -> DataFrame:
        path = fixtures.write_rows(self.folder / "given" / f"{stem}.{self._next()}.json",
                                   self._dicts(rows))
        return fixtures.read_fixture(self.spark, path)

    def _next(self) -> int:
        self._dumps += 1
        return self._dumps

    @staticmethod
    def _dicts(rows: Iterable[Mapping[str, Any]] | DataFrame) -> list[dict[str, Any]]:
        if isinstance(rows, DataFrame):
            return [r.asDict(recursive=True) for r in rows.collect()]
        return [dict(r) for r in rows]

    def _datasets(self) -> set[str]:
        return set(self._graph().outputs)

    def _graph(self) -> PipelineGraph:
        """The pipeline's graph, loaded once, as an update loads it (its configuration in the
        session, its root_path importable)."""
        if self._loaded is None:
            from exactly_once.local.graph.loader import load_graph

            with self._as_in_an_update():
                self._loaded = load_graph(self.spark, self.pipeline.files,
                                          self.pipeline.scope.namespace)
        return self._loaded

    @contextmanager
    def _as_in_an_update(self) -> Iterator[None]:
        from exactly_once.local.engine import update_settings
        from exactly_once.local.execution.pipeline import pipeline_configuration
        from exactly_once.local.graph.loader import importable

        conf, parameters = pipeline_configuration(self.pipeline.settings,
                                                  self.pipeline.configuration)
        for key, value in conf.items():
            self.spark.conf.set(key, value)
        root = self.pipeline.root_path
        with update_settings.configured(self.spark, parameters), \
                (importable(root) if root else nullcontext()):
            yield

    # -- one dataset ------------------------------------------------------------------------------
    def dataset(self, name: str, given: Mapping[str, Iterable[Mapping[str, Any]] | DataFrame]
                | None = None) -> DataFrame:
        """Dataset `name`'s query on `given` rows for what it reads (by any name its code
        uses), the rest of the pipeline not run (units.py): its rows."""
        from exactly_once.testing.units import dataset_rows

        frames = {}
        scope = self.pipeline.scope
        graph = self._graph()
        for text, rows in (given or {}).items():
            name_read = scope.dataset(text, graph.outputs) or text
            frames[name_read] = rows if isinstance(rows, DataFrame) else \
                self._frame(rows, name_read.replace("/", "_"))
        with self._as_in_an_update():
            self.pipeline.catalog.attach(self.spark, scope.namespace)
            return dataset_rows(self.spark, graph, scope, name, frames,
                                self.folder / "units")

    # -- an update --------------------------------------------------------------------------------
    def update(self, refresh: Sequence[str] = (), full_refresh: bool | Sequence[str] = False
               ) -> dict[str, dict[str, int]]:
        """One update, as `exactly-once run` makes it; each flow's counts (rows in and out,
        batches, duplicates and late rows dropped, stale changes ignored, records dropped by
        expectations)."""
        from exactly_once.local.execution.pipeline import run_pipeline

        self._topics.mkdir(parents=True, exist_ok=True)
        self.last = run_pipeline(self.spark, self.pipeline.settings, self.warehouse,
                                 refresh=refresh, full_refresh=full_refresh,
                                 **self.pipeline.run_arguments())
        return {f.flow: {count: getattr(f, count) or 0 for count in FLOW_COUNTS}
                for f in self.last.flows}

    # -- outputs ----------------------------------------------------------------------------------
    def table(self, name: str) -> DataFrame:
        """A table by any name the pipeline's code could use, or a table of its catalog, as
        Delta's reader gives it: each query of the DataFrame reads the table's latest version,
        later updates' included."""
        return self.spark.read.format("delta").load(self._location(name))

    def snapshot(self, name: str) -> DataFrame:
        """The table as it is now, for one look (an assertion): its latest version's Parquet
        files (`snapshot_files.read_latest`, Delta's reader where the log cannot describe them),
        about a tenth of what `table`'s first query costs; a later update does not change it."""
        from exactly_once.local.storage.snapshot_files import read_latest

        return read_latest(self.spark, self._location(name))

    def _location(self, name: str) -> str:
        from exactly_once.local.inspect.preview import located
        from exactly_once.local.storage.warehouse import Warehouse

        _, where = located(Warehouse(self.warehouse), self.pipeline.scope, name)
        return where

    def events(self) -> list[dict[str, Any]]:
        """The last update's event log rows, oldest first."""
        from exactly_once.local.observe import event_log
        from exactly_once.local.storage.warehouse import Warehouse

        if self.last is None:
            return []
        log = event_log.read(self.spark, Warehouse(self.warehouse))
        rows = log.where(log.origin.update_id == self.last.update_id) \
            .orderBy("sequence.control_plane_seq_no")
        return [r.asDict(recursive=True) for r in rows.collect()]

    def expectations(self, dataset: str) -> dict[str, dict[str, int]]:
        """Each expectation on `dataset` in the last update, from the event log: its passed and
        failed records, and the records the dataset's flows dropped."""
        found: dict[str, dict[str, int]] = {}
        for event in self.events():
            if event["event_type"] != "flow_progress":
                continue
            quality = ((event.get("details") or {}).get("flow_progress") or {}) \
                .get("data_quality") or {}
            for e in quality.get("expectations") or []:
                if e["dataset"] != dataset:
                    continue
                counts = found.setdefault(e["name"], {"passed": 0, "failed": 0, "dropped": 0})
                counts["passed"] += e["passed_records"] or 0
                counts["failed"] += e["failed_records"] or 0
            if found and event["origin"]["dataset_name"] == dataset:
                for counts in found.values():
                    counts["dropped"] = quality.get("dropped_records") or 0
        return found
