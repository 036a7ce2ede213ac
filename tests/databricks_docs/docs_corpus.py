"""The runner of the Databricks docs corpus (tests/databricks_docs/): small pipelines written the
way Databricks' documentation writes them, run in the session's Spark, their tables read back.

Every test module of the corpus cites the docs page its pipelines come from, and its expected
tables come from what that page says the tables hold, never from the runtime's output. What
Databricks itself refuses, and what the local runtime refuses, is one line of `dry-run`
(`refusal`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from textwrap import dedent
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession

from exactly_once import cli
from exactly_once.errors import ExactlyOnceError
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe.progress import UpdateResult
from exactly_once.paths import pipeline_files
from exactly_once.settings.pipeline import Settings
from exactly_once.testing.harness import PipelineHarness
from exactly_once.workspace.pipelines import files_pipeline

ERROR = "exactly-once: error: "
HEADER = "from pyspark import pipelines as dp\nfrom pyspark.sql import functions as F\n"


def dp_file(*blocks: str) -> str:
    """A pipeline file: the imports its examples take for granted (`dp`, `F`), then `blocks`,
    each dedented."""
    return HEADER + "".join(dedent(block) for block in blocks)


def pipeline(tmp_path: Path, **files: str) -> Path:
    """A pipeline folder: `name.py` for each file, dedented."""
    root = tmp_path / "pipeline"
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / f"{name}.py").write_text(dedent(text))
    return root


def json_files(directory: Path, **files: Iterable[dict[str, Any]]) -> Path:
    """`name.json` in `directory` for each file: one JSON object a line."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, records in files.items():
        (directory / f"{name}.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    return directory


def run(spark: SparkSession, settings: Settings, root: Path, warehouse: Path,
        **options: Any) -> UpdateResult:
    """One update of the pipeline in `root` into `warehouse`, through the pytest plugin's
    harness (exactly_once.testing): the corpus is the plugin's first user. `options`:
    `full_refresh`, `refresh`, `configuration` (the pipeline's), as `run_pipeline` takes them;
    any other goes to `run_pipeline` itself."""
    files = tuple(pipeline_files(root))  # the folder's files now: a test may add one
    key = (id(spark), str(warehouse))
    configuration = options.pop("configuration", None)
    harness = _harnesses.get(key)
    if harness is None or set(options) - {"full_refresh", "refresh"}:
        if set(options) - {"full_refresh", "refresh"}:  # progress, rederive...
            return run_pipeline(spark, settings, warehouse, pipelines_dir=root,
                                configuration=configuration, **options)
        harness = _harnesses[key] = PipelineHarness(
            spark, files_pipeline(root, files, settings), warehouse.parent / "harness",
            warehouse=warehouse)
    harness.pipeline = replace(harness.pipeline, files=files,
                               configuration=dict(configuration or {}))
    harness.update(**options)
    assert harness.last is not None
    return harness.last


_harnesses: dict[tuple[int, str], PipelineHarness] = {}


def delta(spark: SparkSession, path: Path | str) -> DataFrame:
    return spark.read.format("delta").load(str(path))


def ordered(records: Iterable[tuple]) -> list[tuple]:
    """`records` sorted, NULLs last in each column: a table as the docs print it, in the order
    `rows` reads one."""
    return sorted(records, key=lambda t: tuple((v is None, v) for v in t))


def rows(spark: SparkSession, path: Path | str, *columns: str) -> list[tuple]:
    """The Delta table at `path` as `ordered` tuples of `columns` (default: every column)."""
    df = delta(spark, path)
    return ordered(tuple(r) for r in df.select(*(columns or df.columns)).collect())


def detail(spark: SparkSession, path: Path | str) -> Row:
    """`DESCRIBE DETAIL` of the Delta table at `path`: description, partitionColumns,
    clusteringColumns, properties, ..."""
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]


def expectation_metrics(spark: SparkSession, warehouse: Path) -> dict[tuple[str, str], tuple]:
    """(flow, expectation) -> (dataset, passed_records, failed_records) from the event log's
    `flow_progress` rows, as Databricks' event log records them
    (https://docs.databricks.com/aws/en/ldp/monitor-event-logs)."""
    log = delta(spark, warehouse / "event_log").where("event_type = 'flow_progress'")
    found = log.selectExpr("origin.flow_name AS flow",
                           "explode(details.flow_progress.data_quality.expectations) AS e")
    return {(r["flow"], r["e"]["name"]): (r["e"]["dataset"], r["e"]["passed_records"],
                                          r["e"]["failed_records"])
            for r in found.collect()}


def refusal(root: Path, capsys, file: str, dataset: str, words: Sequence[str]) -> str:
    """`exactly-once dry-run` of `root` refuses it in one line naming `file`, `dataset` and each
    of `words` (what is not supported, in any case); the line, without its prefix."""
    code = cli.main(["dry-run", "--pipelines", str(root)])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith(ERROR), out + err
    line = lines[0].removeprefix(ERROR)
    assert line.startswith(f"{root / (file + '.py')}: dataset `{dataset}`: "), line
    for word in words:
        assert word.lower() in line.lower(), (word, line)
    return line


def run_refusal(spark: SparkSession, settings: Settings, root: Path, warehouse: Path) -> str:
    """What `exactly-once run` prints for the update of `root` into `warehouse` that stops (the
    CLI prints the error as `ERROR` + this line); `refusal` is the same mistake's line from
    `dry-run`."""
    try:
        run(spark, settings, root, warehouse)
    except ExactlyOnceError as err:
        return cli.one_line(str(err))
    raise AssertionError("the update ran")
