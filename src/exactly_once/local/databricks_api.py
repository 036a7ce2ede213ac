"""The parts of the Databricks `dp` API that open-source pyspark lacks, supplied for local runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import pipelines as dp

from exactly_once.local import auto_cdc_spec, expectations

# name on `pyspark.pipelines` -> local implementation
_LOCAL_API = {
    "create_auto_cdc_flow": auto_cdc_spec.create_auto_cdc_flow,
    "apply_changes": auto_cdc_spec.create_auto_cdc_flow,  # the legacy DLT name
    **expectations.DECORATORS,  # expect, expect_or_drop, expect_or_fail, expect_all, ...
}


@contextmanager
def installed() -> Iterator[None]:
    """While loading pipeline files, `dp.<name>` resolves to the Databricks-compatible versions."""
    saved = {name: getattr(dp, name, None) for name in _LOCAL_API}
    for name, fn in _LOCAL_API.items():
        setattr(dp, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            if fn is None:
                delattr(dp, name)
            else:
                setattr(dp, name, fn)
