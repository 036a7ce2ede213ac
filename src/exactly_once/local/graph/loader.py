"""Loads pipeline definition files unchanged and returns the graph they declare.

A mistake in a file is a `DeclarationError` naming the file (and the dataset, when it is about
one), whether the file raised it while it ran or the graph found it once every file had run:
`run` stops at the first, `dry-run` (dry_run.py) collects them all, in the same words.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterable
from pathlib import Path

from pyspark.pipelines.graph_element_registry import graph_element_registration_context
from pyspark.sql import SparkSession

from exactly_once.errors import DeclarationError, PipelineFileError, first_line
from exactly_once.local.graph import dp_extensions
from exactly_once.local.graph.registry import PipelineGraph


def load_graph(spark: SparkSession, files: Iterable[Path]) -> PipelineGraph:
    """Run each file as Databricks does, with `spark` as a global, and collect what it declares;
    the first mistake found is raised."""
    graph = PipelineGraph()
    with graph_element_registration_context(graph), dp_extensions.installed(graph):
        for path in files:
            run_file(spark, graph, path)
    graph.complete()
    return graph


def run_file(spark: SparkSession, graph: PipelineGraph, path: Path) -> None:
    """One pipeline file, as Databricks runs it: `spark` a global, declarations going to the
    active registry, `graph`, which notes that `path` declared them. Whatever the file raises is
    a DeclarationError naming it: an error of its own (an import that fails...) as a
    PipelineFileError with the error's type and first line."""
    graph.loading = shown(path)
    try:
        runpy.run_path(str(path), init_globals={"spark": spark}, run_name="__pipeline__")
    except DeclarationError as err:
        err.in_file(graph.loading)
        raise
    except Exception as err:  # noqa: BLE001 - the file's own code: a mistake of the file
        raise PipelineFileError(f"{type(err).__name__}: {first_line(err)}",
                                file=graph.loading) from err
    finally:
        graph.loading = None


def shown(path: Path) -> str:
    """`path` as the person typed it, relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
