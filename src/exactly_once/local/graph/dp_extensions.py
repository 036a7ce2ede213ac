"""Databricks' extensions of the `dp` API that open-source pyspark lacks, supplied for local runs.

Pipeline files are written against Databricks: they call `dp.create_auto_cdc_flow` with its
Databricks signature (SCD2 included), `dp.create_auto_cdc_from_snapshot_flow`, the `dp.expect*`
decorators, and declare datasets and flows with Databricks' arguments
(`dp.table(path=..., private=...)`, dataset_declarations.py; `dp.append_flow(once=...)`,
`dp.create_sink`, `dp.foreach_batch_sink`, flow_declarations.py). While the local runtime
loads them, `installed` puts local stand-ins for these names on `pyspark.pipelines`, and takes
them off again afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark import pipelines as dp

from exactly_once.local.auto_cdc.from_snapshot.spec import SnapshotCdcDeclarations
from exactly_once.local.auto_cdc.spec import AutoCdcDeclarations
from exactly_once.local.graph import dataset_declarations, event_hooks, expectations
from exactly_once.local.graph.flow_declarations import FlowDeclarations
from exactly_once.local.graph.registry import PipelineGraph


@contextmanager
def installed(graph: PipelineGraph) -> Iterator[None]:
    """While loading pipeline files into `graph`, `dp.<name>` resolves to the
    Databricks-compatible versions."""
    create_auto_cdc_flow = AutoCdcDeclarations(graph.register_auto_cdc_spec).create_auto_cdc_flow
    from_snapshot = SnapshotCdcDeclarations(
        graph.register_snapshot_spec).create_auto_cdc_from_snapshot_flow
    flows = FlowDeclarations(graph.register_flow, graph.register_output)
    stand_ins: dict[str, Callable[..., object]] = {
        "create_auto_cdc_flow": create_auto_cdc_flow,
        "apply_changes": create_auto_cdc_flow,  # the legacy DLT name
        "create_auto_cdc_from_snapshot_flow": from_snapshot,
        "apply_changes_from_snapshot": from_snapshot,  # its legacy DLT name
        "append_flow": flows.append_flow,
        "replace_flow": flows.replace_flow,  # Beta: refused by name
        "update_flow": flows.update_flow,
        "create_sink": flows.create_sink,
        "foreach_batch_sink": flows.foreach_batch_sink,
        "on_event_hook": event_hooks.on_event_hook(graph.register_event_hook),
        **expectations.DECORATORS,  # expect, expect_or_drop, expect_or_fail, expect_all, ...
        **dataset_declarations.DECLARATIONS,  # table, materialized_view, temporary_view, ...
    }
    saved: dict[str, object | None] = {name: getattr(dp, name, None) for name in stand_ins}
    for name, stand_in in stand_ins.items():
        setattr(dp, name, stand_in)
    try:
        yield
    finally:
        for name, original in saved.items():
            if original is None:
                delattr(dp, name)
            else:
                setattr(dp, name, original)
