"""The pytest plugin (entry point `pytest11`: `exactly_once = exactly_once.testing.plugin`).

Fixtures a Databricks template user recognises, with no workspace:

    spark            one warm local session per test session (Delta, and a catalog of its own
                     with the bundle's fixture tables: local_session.py): the templates'
                     fixture of the same name, which tests written for Databricks Connect that
                     take only `spark` use unchanged; Databricks Connect's
                     `DatabricksSession.builder.getOrCreate()` gives the same session where
                     databricks-connect is not installed (databricks_connect.py), so the
                     templates' own conftest and tests run as they are
    load_fixture     the templates' helper: `load_fixture("samples.nyctaxi.trips.json")` is
                     `fixtures/<filename>` of the bundle (`.json` rows, `.csv`, `.parquet`) as
                     a DataFrame
    pipeline         the bundle's pipeline on a warehouse and catalog of the test's own
                     (harness.py); `pipeline_for("KEY")` for a bundle with several

The bundle is the one the test file is in: its folder, or the nearest one above it with a
`databricks.yml` (the `exactly_once_bundle` ini option names another). `*.pipeline_test.yml`
files are collected as tests (yaml_tests.py).

Importing this module imports only pytest: a session that asks for none of the fixtures and
has no YAML tests starts no JVM and reads no bundle files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from exactly_once.testing.harness import PipelineHarness

BUNDLE_INI = "exactly_once_bundle"
ENGINE_INI = "exactly_once_engine"
YAML_SUFFIX = ".pipeline_test.yml"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(BUNDLE_INI, "the bundle the exactly-once fixtures run (default: the test "
                  "file's folder, or the nearest one above it with a databricks.yml)",
                  default="")
    parser.addini(ENGINE_INI, "run the session in the resident engine when one runs "
                  "(`exactly-once engine start`): no JVM start per pytest", type="bool",
                  default=True)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before the first conftest is imported (the templates' imports Databricks Connect):
    `databricks.connect` resolvable, and the session's bundle known."""
    from exactly_once.testing import databricks_connect, local_session

    databricks_connect.install()
    local_session.configure(lambda: session_bundle(early_config))


def pytest_unconfigure(config: pytest.Config) -> None:
    from exactly_once.testing import local_session

    local_session.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """The whole session in the resident engine, when one runs and the session may go there:
    a second `pytest` pays no JVM start. Not a session of several workers (pytest-xdist), nor
    one inside the engine already (EXACTLY_ONCE_ENGINE=off there)."""
    import os

    if (not config.getini(ENGINE_INI) or getattr(config.option, "numprocesses", None)
            or os.environ.get("EXACTLY_ONCE_ENGINE", "").lower() == "off"
            or os.environ.get("PYTEST_XDIST_WORKER")):
        return None
    from exactly_once.cli import engine_client
    from exactly_once.services import engine

    if engine.status(engine_client.ENGINE_DIR) is None:
        return None
    return engine_client.forward(["test", *config.invocation_params.args])


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith(YAML_SUFFIX):
        from exactly_once.testing.yaml_tests import PipelineTestFile

        return PipelineTestFile.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    """One local session for the test session (the resident engine's when one runs in this
    process, else a new one), with the bundle's fixture tables by their names."""
    from exactly_once.testing import local_session

    return local_session.get_or_create()


@pytest.fixture
def load_fixture(spark: SparkSession, request: pytest.FixtureRequest
                 ) -> Callable[[str], DataFrame]:
    """`load_fixture(filename)`: the bundle's `fixtures/<filename>` as a DataFrame."""
    from exactly_once.local.catalog.fixtures import read_fixture
    from exactly_once.workspace.pipelines import FIXTURES_DIR

    folder = bundle_folder(request) / FIXTURES_DIR

    def load(filename: str) -> DataFrame:
        return read_fixture(spark, folder / filename)
    return load


@pytest.fixture
def pipeline_for(spark: SparkSession, request: pytest.FixtureRequest, tmp_path: Path
                 ) -> Iterator[Callable[..., PipelineHarness]]:
    """`pipeline_for("KEY", target=None, variables=None)`: the bundle's pipeline KEY on a
    warehouse and catalog of this test's own (the bundle's fixture tables are seeded once per
    session, and read by each test as they are). After the test, `spark`'s names are the
    session's catalog's again."""
    from exactly_once.testing import local_session

    made: list[int] = []

    def open_pipeline(key: str | None = None, target: str | None = None,
                      variables: dict[str, str] | None = None) -> PipelineHarness:
        from exactly_once.testing.harness import PipelineHarness
        from exactly_once.workspace.pipelines import local_pipeline, open_bundle

        bundle = open_bundle(bundle_folder(request), target, variables)
        made.append(len(made))
        folder = tmp_path / f"pipeline-{len(made)}"
        return PipelineHarness(spark, local_pipeline(bundle, key), folder,
                               fixtures_seeded_in=local_session.fixture_tables())
    yield open_pipeline
    if made:
        local_session.restore_catalog()


@pytest.fixture
def pipeline(pipeline_for: Callable[..., PipelineHarness]) -> PipelineHarness:
    """The bundle's pipeline (its only one) on a warehouse and catalog of this test's own."""
    return pipeline_for()


def session_bundle(config: pytest.Config) -> Path | None:
    """The session's bundle: the ini option's, else the nearest folder with a bundle
    configuration file at or above where pytest runs, else its root directory's; None when
    there is none."""
    from exactly_once.bundle.config import nearest_root

    return _named_bundle(config) or nearest_root(Path(config.invocation_params.dir)) \
        or nearest_root(Path(config.rootpath))


def bundle_folder(request: Any) -> Path:
    """The bundle of the test being run: the ini option's, else the test file's folder or the
    nearest one above it with a bundle configuration file."""
    from exactly_once.bundle.config import bundle_root, nearest_root

    # Else the current folder's, or one line saying there is none.
    return _named_bundle(request.config) or nearest_root(Path(request.path).parent) \
        or bundle_root(None)


def _named_bundle(config: pytest.Config) -> Path | None:
    """The bundle the `exactly_once_bundle` ini option names (relative to the root directory),
    or None when it names none."""
    from exactly_once.bundle.config import bundle_root

    named = config.getini(BUNDLE_INI)
    return bundle_root(Path(config.rootpath) / named) if named else None
