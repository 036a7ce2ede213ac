"""The pytest session's one local Spark session: what the `spark` fixture gives, and what
Databricks Connect's `DatabricksSession.builder.getOrCreate()` and `databricks.sdk.runtime.spark`
give in a pytest session (databricks_connect.py).

Built on first use, not before: a session whose tests ask for none of them starts no JVM. Its
catalog is one of its own, seeded from the bundle's `fixtures/` folder, so a test reads
`spark.read.table("samples.nyctaxi.trips")` as it does through Databricks Connect, and never
the bundle's .local/ catalog (what `exactly-once run` last published): a test sees only what
the bundle's fixtures and the test itself give. The bundle is the session's: the
`exactly_once_bundle` ini option's, else the nearest folder with a `databricks.yml` at or above
where pytest runs; a session outside any bundle has no catalog.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from exactly_once.local.catalog.catalog import LocalCatalog


@dataclass
class _Session:
    folder: Path  # the session's warehouse, catalog and seeded fixture tables
    bundle: Callable[[], Path | None]  # asked when the session is built
    spark: SparkSession | None = None
    catalog: LocalCatalog | None = None


_current: _Session | None = None


def configure(bundle: Callable[[], Path | None]) -> None:
    """How the session's bundle is found (None: no catalog), asked once the session is
    built: a pytest session that builds none reads nothing."""
    global _current
    stop()
    _current = _Session(Path(tempfile.mkdtemp(prefix="exactly-once-pytest-")), bundle)


def _nearest_bundle() -> Path | None:
    from exactly_once.bundle.config import nearest_root

    return nearest_root(Path.cwd())


def _session() -> _Session:
    if _current is None:  # outside a pytest session that loaded the plugin
        configure(_nearest_bundle)
    assert _current is not None
    return _current


def fixture_tables() -> Path:
    """Where the bundle's fixture tables are seeded once for the session: its own catalog's
    and every test pipeline's (testing/harness.py) point to them."""
    return _session().folder / "fixture-tables"


def get_or_create() -> SparkSession:
    """The session, built on first use with the bundle's fixture tables in its catalog."""
    held = _session()
    if held.spark is None:
        from exactly_once.local.catalog.catalog import LocalCatalog
        from exactly_once.local.engine.session import build_session
        from exactly_once.workspace.pipelines import FIXTURES_DIR

        bundle = held.bundle()
        spark = build_session(held.folder / "spark-warehouse", app_name="pytest")
        if bundle is not None:
            catalog = LocalCatalog(held.folder / "catalog", bundle / FIXTURES_DIR,
                                   seeded_in=fixture_tables())
            catalog.attach(spark)
            held.catalog = catalog
        held.spark = spark
    return held.spark


def new_session() -> SparkSession:
    """A new session of the same Spark: temporary views and SQL settings of its own, the
    session's catalog (a catalog's names are SQL settings, which a new session does not copy)."""
    spark = get_or_create().newSession()
    assert _current is not None
    if _current.catalog is not None:
        _current.catalog.attach(spark, seed=False)
    return spark


def restore_catalog() -> None:
    """The session's catalog back as the session's, after a test pipeline made its own the
    session's (a test pipeline's given rows are not the next test's)."""
    if _current is not None and _current.spark is not None and _current.catalog is not None:
        _current.catalog.attach(_current.spark, seed=False)


def stop() -> None:
    """The session stopped and its folder removed (the end of the pytest session)."""
    global _current
    if _current is None:
        return
    held, _current = _current, None
    if held.spark is not None:
        held.spark.stop()
    shutil.rmtree(held.folder, ignore_errors=True)
