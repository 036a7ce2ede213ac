"""One dataset's query on given rows, the rest of the pipeline not run: dbt's unit test, for
declarative pipelines.

    rows = pipeline.dataset("fares_by_zip", given={"taxi_trips": [{"pickup_zip": 1, ...}]})

Each read of the dataset's query (`spark.read.table`, `readStream.table`, SQL's `FROM` and
`STREAM`, by any name its code uses) is answered with the rows given for that name, as a batch:
a streaming table's query runs as one batch of them (what its first micro-batch would see). A
temporary view it reads runs on the same given rows unless the view's own rows are given; a
table of the local catalog that is not given is read as an update reads it. A table with
several append flows gives the union of their queries. An AUTO CDC target's rows are what its
changes make of an empty target: the given changes applied as one batch, with the runtime's
SCD1 or SCD2 (AUTO CDC FROM SNAPSHOT targets are not unit-tested: run an update).

Expectations the dataset declares apply: an `expect_or_drop` drops its rows here too.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from exactly_once.errors import FixtureError
from exactly_once.local.auto_cdc.from_snapshot.spec import SnapshotCdcSpec
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.catalog.scope import ReadScope
from exactly_once.local.engine import pipeline_session
from exactly_once.local.graph.expectations import apply_expectations, declared
from exactly_once.local.graph.reads import NO_OPTIONS, resolved_reads
from exactly_once.local.graph.registry import PipelineGraph


def dataset_rows(spark: SparkSession, graph: PipelineGraph, scope: ReadScope, name: str,
                 given: Mapping[str, DataFrame], scratch: Path) -> DataFrame:
    """What dataset `name` holds when its reads are answered with `given` (by dataset name);
    `scratch`: a folder for an AUTO CDC target's tables."""
    if name not in graph.outputs:
        raise FixtureError(f"the pipeline has no dataset `{name}`; its datasets: "
                           f"{', '.join(graph.outputs)}")
    flows = graph.flows_into(name) if not graph.is_view(name) else [graph.view_flow(name)]
    if any(isinstance(f, SnapshotCdcSpec) for f in flows):
        raise FixtureError(f"`{name}` is an AUTO CDC FROM SNAPSHOT target: test it with an "
                           f"update (pipeline.given(...), pipeline.update())")
    resolver = _Resolver(spark, graph, scope, name, given, scratch)
    with pipeline_session.running(spark), resolved_reads(resolver.resolve):
        frames = [resolver.query(flow) for flow in flows]
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame, allowMissingColumns=True)
    return result


class _Resolver:
    def __init__(self, spark: SparkSession, graph: PipelineGraph, scope: ReadScope,
                 dataset: str, given: Mapping[str, DataFrame], scratch: Path):
        self.spark, self.graph, self.scope, self.dataset = spark, graph, scope, dataset
        self.given, self.scratch = given, scratch

    def query(self, flow: Any) -> DataFrame:
        if isinstance(flow, AutoCdcSpec):
            return self._auto_cdc(flow)
        df, _ = apply_expectations(flow.func(), declared(flow.func), flow.target)
        return df

    def resolve(self, text: str, streaming: bool, options: Mapping[str, str] = NO_OPTIONS
                ) -> DataFrame | None:
        name = self.scope.dataset(text, self.graph.outputs) or text
        if name in self.given:
            return self.given[name]
        if name in self.graph.outputs:
            if self.graph.is_view(name):  # a view not given runs on the given rows
                return self.query(self.graph.view_flow(name))
            raise FixtureError(f"`{self.dataset}` reads `{text}`: give its rows "
                               f"(given={{'{name}': [...]}})")
        return self.scope.external(self.spark, text, streaming=False, dataset=self.dataset,
                                   options=options)

    def _auto_cdc(self, spec: AutoCdcSpec) -> DataFrame:
        """The target's rows after the given changes, applied as one batch to an empty
        target, in a scratch warehouse of its own."""
        from exactly_once.local.execution import flows
        from exactly_once.local.observe.progress import Progress
        from exactly_once.local.observe.timeline import Timeline
        from exactly_once.local.storage.warehouse import Warehouse

        changes = self.resolve(spec.source, streaming=False)
        assert changes is not None
        self.scratch.mkdir(parents=True, exist_ok=True)
        scratch = Warehouse(Path(tempfile.mkdtemp(prefix=f"{spec.target}-", dir=self.scratch)))
        flows.run_auto_cdc_flow(self.spark, dataclasses.replace(spec, once=True), changes,
                                scratch, Progress(quiet=True), Timeline())
        return self.spark.read.format("delta").load(str(scratch.table_path(spec.target)))
