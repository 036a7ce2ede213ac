"""Loads pipeline definition files unchanged and returns the graph they declare.

Each file runs as a module of its own, `__pipeline__`, with `spark` as a global: the session of
whichever flow the reading thread runs (engine/pipeline_session.py), and `import dlt` giving the
legacy `dlt` module (legacy_dlt.py) to the file alone. Its functions travel to Python workers
by value (a UDF, registered as the file loads or used in a flow): no worker could import the
file by its name.

A notebook (Databricks' source format, or `.ipynb`) runs as its cells' code
(bundle/notebooks.py). A `.sql` file's statements become the same declarations
(sql_declarations.py), each located at its file and line.

A mistake in a file is a `DeclarationError` naming the file (and the dataset, when it is about
one), whether the file raised it while it ran or the graph found it once every file had run:
`run` stops at the first, `dry-run` (dry_run.py) collects them all, in the same words.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark import cloudpickle
from pyspark.pipelines.graph_element_registry import graph_element_registration_context
from pyspark.sql import SparkSession

from exactly_once.bundle import read_library
from exactly_once.errors import BundleError, DeclarationError, PipelineFileError, first_line
from exactly_once.local.catalog.names import Namespace
from exactly_once.local.engine import pipeline_session
from exactly_once.local.graph import dp_extensions, legacy_dlt, sql_declarations
from exactly_once.local.graph.registry import PipelineGraph

MODULE = "__pipeline__"  # the name a pipeline file runs as
SQL = "sql"  # a pipeline SQL file's language (sql_declarations.py); every other is Python


def load_graph(spark: SparkSession, files: Iterable[Path],
               namespace: Namespace | None = None) -> PipelineGraph:
    """Run each file as Databricks does, with `spark` as a global, and collect what it declares;
    the first mistake found is raised. `namespace`: the pipeline's catalog and schema, which
    its datasets' names of several parts are read against (None: main.default)."""
    graph = PipelineGraph(namespace=namespace or Namespace())
    with graph_element_registration_context(graph), dp_extensions.installed(graph), \
            pipeline_session.running(spark):
        for path in files:
            run_file(spark, graph, path)
    graph.complete()
    return graph


def run_file(spark: SparkSession, graph: PipelineGraph, path: Path) -> None:
    """One pipeline file, as Databricks runs it (a SQL file: sql_declarations.py): `spark` a
    global, declarations going to the active registry, `graph`, which notes that `path` declared
    them. Whatever the file raises is a DeclarationError naming it: an error of its own (an
    import that fails...) as a PipelineFileError with the error's type and first line."""
    graph.loading = shown(path)
    try:
        source = read_library(path)  # a notebook's cells as code; %md cells left out
        if source.language == SQL:
            sql_declarations.run_sql_file(spark, graph, path, shown(path), source.text)
            return
        with _module(path) as module:
            module.__dict__.update(spark=pipeline_session.SessionView(spark),
                                   __builtins__=legacy_dlt.file_builtins())
            code = compile(source.text, str(path), "exec", dont_inherit=True)
            exec(code, module.__dict__)  # noqa: S102 - running the pipeline file is the point
    except DeclarationError as err:
        err.in_file(graph.loading)
        raise
    except BundleError as err:  # a notebook's own problem (a magic it cannot run), located
        raise PipelineFileError(first_line(err)) from None  # at its file and line already
    except Exception as err:  # noqa: BLE001 - the file's own code: a mistake of the file
        raise PipelineFileError(f"{type(err).__name__}: {first_line(err)}",
                                file=graph.loading) from err
    finally:
        graph.loading = None


@contextmanager
def _module(path: Path) -> Iterator[types.ModuleType]:
    """The file's module, importable by its name while the file runs (as `runpy` makes one),
    and pickled by value (pyspark's cloudpickle): a worker process gets the function itself."""
    module = types.ModuleType(MODULE)
    module.__dict__.update(__file__=str(path), __cached__=None, __loader__=None,
                           __package__="", __spec__=None)
    saved = sys.modules.get(MODULE)
    sys.modules[MODULE] = module
    cloudpickle.register_pickle_by_value(module)  # by name: every pipeline file's
    try:
        yield module
    finally:
        if saved is None:
            del sys.modules[MODULE]
        else:
            sys.modules[MODULE] = saved


@contextmanager
def importable(root: Path) -> Iterator[None]:
    """Modules under `root` importable by pipeline code while the block runs, as a bundle
    pipeline's `root_path` is on Databricks ("added to sys.path when executing Python sources
    during pipeline execution"); each module imported from there travels to Python workers by
    value, as the pipeline files' own functions do (no worker has `root` on its path)."""
    folder = str(root.resolve())
    before = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
        for name in set(sys.modules) - before:  # imported from `root`: forgotten, so the
            module = sys.modules.get(name)       # next update imports an edited file anew
            if module is not None and str(getattr(module, "__file__", "") or "").startswith(
                    folder + "/"):
                del sys.modules[name]


def by_value_under(root: Path) -> None:
    """Modules imported from `root` so far pickled by value (UDFs that call them)."""
    folder = str(root.resolve()) + "/"
    for module in list(sys.modules.values()):
        if str(getattr(module, "__file__", "") or "").startswith(folder):
            cloudpickle.register_pickle_by_value(module)


def shown(path: Path) -> str:
    """`path` as the person typed it, relative to the working directory when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
