"""Before an update writes anything: can each table it writes take what its flows now write?

A change of the pipeline's definition (conf/, a pipeline file, the project's code) can change
what a flow writes. A column added or a type widened, the table takes on the next update
(storage/schema_evolution.py). Anything else the rows it holds cannot follow: a column its flows
no longer write, a type narrowed or changed, an AUTO CDC flow's keys or sequence changed (its
state is keyed and ordered by the old ones). Such a change is refused here, before any table,
checkpoint or state is touched, with one line naming each change, the tables it breaks and the
command that rebuilds them from bronze (`exactly-once rederive`, execution/rederive.py):
nothing is half-written.

The check analyzes every flow's query against empty inputs (graph/dry_run.py), which costs a
second or two, so an update does it only when the definition changed since the last update
that finished (`fingerprint`, recorded with each flow's AUTO CDC keys and sequence in
`<warehouse>/_pipeline/definition.json`). `dry-run` does it whenever the warehouse has tables.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

import exactly_once
from exactly_once.errors import SchemaChangeError
from exactly_once.local.auto_cdc.spec import AutoCdcSpec
from exactly_once.local.graph.dataflow import MATERIALIZED_VIEW, Dataflow
from exactly_once.local.graph.dry_run import Analysis, analyze_graph
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.graph.stored_tables import StoredTables
from exactly_once.local.storage.files import write_atomic
from exactly_once.local.storage.schema_evolution import (
    REMOVED,
    SchemaChange,
    changes,
    stored_schema,
)
from exactly_once.local.storage.warehouse import Warehouse

REDERIVE = "exactly-once rederive"


@dataclass(frozen=True)
class Breakage:
    """One incompatible change of one table."""

    table: str
    change: str  # as a person reads it: "`amount` DECIMAL(18,2) -> STRING"


def fingerprint(configuration: Mapping[str, str], files: Sequence[Path]) -> str:
    """What decides what the flows write: the pipeline's settings, its files and the project's
    own code (the transforms the files call, the runtime that writes AUTO CDC targets)."""
    digest = hashlib.sha256(json.dumps(dict(sorted(configuration.items()))).encode())
    package = Path(exactly_once.__file__).parent
    for path in [*files, *sorted(package.rglob("*.py"))]:
        digest.update(str(path.name).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def recorded(warehouse: Warehouse) -> dict[str, Any]:
    """The definition the last finished update recorded ({} before the first)."""
    path = warehouse.definition_path()
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _cdc_definition(spec: AutoCdcSpec) -> dict[str, Any]:
    return {"target": spec.target, "keys": list(spec.keys),
            "sequence_by": str(spec.sequence_by)}


def record(warehouse: Warehouse, graph: PipelineGraph, fingerprint: str) -> None:
    """Note the definition an update finished with (atomically)."""
    write_atomic(warehouse.definition_path(), json.dumps({
        "fingerprint": fingerprint,
        "auto_cdc": {spec.name: _cdc_definition(spec) for spec in graph.auto_cdc_flows},
    }, indent=2))


def breakages(analysis: Analysis, warehouse: Warehouse, tables: Iterable[str],
              definition: Mapping[str, Any]) -> list[Breakage]:
    """The incompatible changes of `tables` (those that exist) against what their flows write
    now; `definition`: the one recorded (for AUTO CDC keys and sequences)."""
    graph, found = analysis.graph, list[Breakage]()
    declared = graph.definitions()
    recomputed = {d.name for d in analysis.dataflow.datasets if d.kind == MATERIALIZED_VIEW}
    for table in tables:
        path = warehouse.table_path(table).resolve()
        stored = stored_schema(str(path)) if warehouse.has_table(table) else None
        written = [analysis.schemas[f.name] for f in graph.flows_into(table)
                   if f.name in analysis.schemas]
        if stored is None or not written or table in recomputed:
            continue  # new, not analyzed, or recomputed whole each update
        if table in declared and declared[table].schema is not None:
            continue  # its declared schema is its own; the update checks the query fits it
        for change in _table_changes(stored, written):
            if not change.compatible:
                found.append(Breakage(table, change.described()))
        for spec in (f for f in graph.flows_into(table) if isinstance(f, AutoCdcSpec)):
            before = (definition.get("auto_cdc") or {}).get(spec.name)
            now = _cdc_definition(spec)
            for key, what in (("keys", "keys"), ("sequence_by", "sequence_by")):
                if before and before.get(key) != now[key]:
                    found.append(Breakage(table, f"AUTO CDC flow `{spec.name}`'s {what} "
                                                 f"{_shown(before[key])} -> {_shown(now[key])}"))
    return found


def _shown(value: Any) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def _table_changes(stored: StructType, written: list[StructType]) -> list[SchemaChange]:
    """Every flow's changes against the table; a top-level column is removed only when no
    flow of the table writes it (several flows may write one table, each its own columns)."""
    found: list[SchemaChange] = []
    seen: set[SchemaChange] = set()
    kept = {f.name.lower() for schema in written for f in schema.fields}
    for schema in written:
        for change in changes(stored, schema):
            top_level_removal = change.change == REMOVED and len(change.parts) == 1
            if (top_level_removal and change.column.lower() in kept) or change in seen:
                continue
            seen.add(change)
            found.append(change)
    return found


def refusal(found: list[Breakage], dataflow: Dataflow) -> SchemaChangeError:
    """One line: each change, the tables it breaks, the command that rebuilds them."""
    broken = dataflow.upstream_first(b.table for b in found)
    # Re-deriving a table re-derives what reads it: naming the first broken ones is enough.
    roots = [t for t in broken if not any(t in dataflow.downstream([o]) for o in broken
                                          if o != t)]
    changed = "; ".join(dict.fromkeys(b.change for b in found))
    return SchemaChangeError(
        f"the tables cannot take this change of the pipeline, nothing was written: {changed}; "
        f"it breaks {', '.join(broken)}; rebuild them from bronze with "
        f"`{REDERIVE} {' '.join(roots)}`")


def refuse_incompatible(spark: SparkSession, graph: PipelineGraph, warehouse: Warehouse,
                        tables: Sequence[str], current: str | None) -> None:
    """Raise SchemaChangeError when a table of `tables` (the ones the update writes without
    resetting them) cannot take what its flows now write; nothing when the definition is the
    one the last finished update recorded (`current`, its fingerprint), or no table exists."""
    definition = recorded(warehouse)
    if current is not None and definition.get("fingerprint") == current:
        return
    if not any(warehouse.has_table(t) for t in tables):
        return
    analysis = analyze_graph(spark, graph, stored=StoredTables(warehouse), ask_snapshots=False)
    found = breakages(analysis, warehouse, tables, definition)
    if found:
        raise refusal(found, analysis.dataflow)
