"""Tests as data: a `*.pipeline_test.yml` file of the bundle, each test given rows per input and
the rows expected per dataset, collected by the plugin as pytest items.

    pipeline: taxi_etl                 # the bundle's pipeline (optional with one)
    tests:
      fares per zip:
        given:                         # a table, a folder or a Kafka topic: rows
          samples.nyctaxi.trips:
            - {trip_distance: 1.4, fare_amount: 8.0, pickup_zip: 10103}
        expect:                        # a dataset: the rows it holds (the columns named)
          fares_by_zip:
            - {pickup_zip: 10103, total_fare: 8.0, trips: 1}
        expectations:                  # optional: an expectation's counts in the update
          taxi_trips: {positive_distance: {passed: 1, failed: 0}}
      arrives in two updates:
        updates:                       # incremental: given, then expect, update by update
          - given: {...}
            expect: {...}
          - given: {...}
            expect: {...}

A test may also name `target`, `variables`, `ordered: true` (rows compared in order) and
`full_refresh` per update. A failure reports as a Python test's does, with the table's diff.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from exactly_once.errors import FixtureError

TEST_KEYS = {"given", "expect", "expectations", "updates", "target", "variables", "ordered",
             "full_refresh"}
UPDATE_KEYS = {"given", "expect", "expectations", "full_refresh", "refresh"}


class PipelineTestFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            document = yaml.safe_load(self.path.read_text()) or {}
        except yaml.YAMLError as err:
            raise FixtureError(f"{self.path}: not valid YAML: {err}") from None
        if not isinstance(document, Mapping) or not isinstance(document.get("tests"), Mapping):
            raise FixtureError(f"{self.path}: a pipeline test file maps `tests` to named tests")
        key = document.get("pipeline")
        for name, spec in document["tests"].items():
            _check(self.path, str(name), spec)
            yield pytest.Function.from_parent(self, name=str(name),
                                              callobj=_runner(key, spec, self.path))


def _check(path: Path, name: str, spec: Any) -> None:
    where = f"{path}: test `{name}`"
    if not isinstance(spec, Mapping):
        raise FixtureError(f"{where}: a mapping of given, expect, updates...")
    unknown = set(spec) - TEST_KEYS
    if unknown:
        raise FixtureError(f"{where}: unknown keys {sorted(unknown)}; a test has "
                           f"{sorted(TEST_KEYS)}")
    if "updates" in spec and ({"given", "expect", "expectations"} & set(spec)):
        raise FixtureError(f"{where}: `updates` holds each update's given and expect")
    for i, update in enumerate(spec.get("updates") or []):
        if not isinstance(update, Mapping) or set(update) - UPDATE_KEYS:
            raise FixtureError(f"{where}: update {i + 1} maps {sorted(UPDATE_KEYS)}")


def _runner(key: str | None, spec: Mapping[str, Any], path: Path) -> Any:
    updates = spec.get("updates") or [{k: spec[k] for k in ("given", "expect", "expectations",
                                                             "full_refresh") if k in spec}]

    def run(pipeline_for: Any) -> None:
        __tracebackhide__ = True
        from exactly_once.testing.compare import assert_table

        harness = pipeline_for(key, target=spec.get("target"),
                               variables=spec.get("variables"))
        for number, update in enumerate(updates, start=1):
            for name, rows in (update.get("given") or {}).items():
                harness.given(name, rows or [])
            harness.update(refresh=update.get("refresh") or (),
                           full_refresh=update.get("full_refresh") or False)
            label = f" after update {number}" if len(updates) > 1 else ""
            for dataset, rows in (update.get("expect") or {}).items():
                assert_table(harness.snapshot(dataset), rows or [],
                             ordered=bool(spec.get("ordered")), name=f"{dataset}{label}")
            for dataset, wanted in (update.get("expectations") or {}).items():
                counts = harness.expectations(dataset)
                for rule, expected in wanted.items():
                    got = {k: counts.get(rule, {}).get(k) for k in expected}
                    assert got == dict(expected), (
                        f"{dataset}{label}: expectation `{rule}`: {got} != {dict(expected)}; "
                        f"the dataset's expectations: {counts}")
    run.__doc__ = f"{path.name}: {spec}"
    return run
