"""Loads pipeline definition files unchanged and returns the graph they declare."""

from __future__ import annotations

import runpy
from collections.abc import Iterable
from pathlib import Path

from pyspark.pipelines.graph_element_registry import graph_element_registration_context
from pyspark.sql import SparkSession

from exactly_once.local.graph import dp_extensions
from exactly_once.local.graph.registry import PipelineGraph


def load_graph(spark: SparkSession, files: Iterable[Path]) -> PipelineGraph:
    """Run each file as Databricks does, with `spark` as a global, and collect what it declares."""
    graph = PipelineGraph()
    with graph_element_registration_context(graph), dp_extensions.installed(graph):
        for path in files:
            run_file(spark, path)
    graph.complete()
    return graph


def run_file(spark: SparkSession, path: Path) -> None:
    """One pipeline file, as Databricks runs it: `spark` a global, declarations going to the
    active registry."""
    runpy.run_path(str(path), init_globals={"spark": spark}, run_name="__pipeline__")
