"""Session fixtures for the data-quality tests: ONE pipeline run (and one GX validation) shared by
test_expectations, test_event_log, test_gx, test_dashboard and test_local_runtime, so they cost
one update in total. A plugin of tests/conftest.py (`pytest_plugins`): test modules use the
fixtures by name, never import them (an imported fixture is set up again for its module).

The stream is generated (seeded) with malformed records of every kind, redeliveries, late and
out-of-order events, and read from a kcat JSONL file: no broker needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from exactly_once.kafka.generator import GeneratorConfig, generate_stream
from exactly_once.kafka.kcat import write_kcat_jsonl
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe.progress import UpdateResult
from exactly_once.settings.pipeline import Settings, load_settings
from exactly_once.settings.quality import load_quality


@dataclass
class QualityRun:
    warehouse: Path
    result: UpdateResult
    settings: Settings


@pytest.fixture(scope="session")
def quality_run(spark, tmp_path_factory) -> QualityRun:
    """The pipeline, one full update over a seeded generated stream with every kind of defect."""
    root = tmp_path_factory.mktemp("quality")
    source = root / "stream.jsonl"
    write_kcat_jsonl(source, generate_stream(GeneratorConfig(
        events=300, orders=40, players=20, malformed_rate=0.06, seed=11,
        start=datetime(2026, 11, 1, tzinfo=timezone.utc))))
    settings = load_settings("local", overrides={"exactly_once.source": f"file:{source}"})
    warehouse = root / "warehouse"
    result = run_pipeline(spark, settings, warehouse, full_refresh=True)
    return QualityRun(warehouse, result, settings)


@pytest.fixture(scope="session")
def validated(spark, quality_run):
    """The GX validation of that run's warehouse, with Data Docs next to it."""
    from exactly_once.quality.validate import validate, warehouse_reader

    data_docs = quality_run.warehouse.parent / "data_docs"
    report = validate(spark, warehouse_reader(spark, quality_run.warehouse), load_quality(),
                      quality_run.settings, data_docs=data_docs)
    return report, data_docs
