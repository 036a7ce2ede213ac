"""`exactly-once rederive [TABLE ...]`: tables rebuilt from what the pipeline keeps of its
sources, in one update, so each is again a pure function of the log under the pipeline's
current definition.

Bronze keeps every Kafka record as delivered and is never reset, so every table derived from
it can be derived again: its rows, checkpoints and AUTO CDC state are deleted (as a full
refresh deletes them) and the update recomputes it from the start of its inputs. That is what a
change of the contract needs when the rows already written do not follow from the new one: a
field the contract now names that earlier records carried (silver and gold held NULL for it),
a rule fixed (quarantined records that now pass, silver records that now fail), a change
`run` refuses (execution/schema_check.py names the tables and this command).

Which tables:
- each one named and every table that reads it, directly, through a view or further down
  (an append table downstream of a rebuilt one would otherwise read all of it again and hold
  its rows twice); with no names, every table derived from a source;
- protected ones too (`pipelines.reset.allowed = false`, which a full refresh leaves, as the XP
  ledger): they are derived from bronze as well. What they hold that Kafka no longer has is in
  bronze, so rebuilding them loses nothing, provided bronze is at least as old as they are: a
  source table created after a protected table downstream of it (bronze dropped by hand and
  started again) may lack records the protected table was built from, and the command refuses;
- never a source (a table whose flows read no table of the pipeline: bronze, which Kafka feeds,
  or the players history, fed by its export files): it is what the others are derived from.

The reset is recorded as a full refresh's is (`_pipeline/reset.json`): a crash in between
makes the next update reset and recompute the same tables.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession

from exactly_once.errors import RefreshError
from exactly_once.local.graph.dataflow import Dataflow
from exactly_once.local.graph.dry_run import analyze_graph
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.local.graph.stored_tables import StoredTables
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.warehouse import Warehouse
from exactly_once.table_properties import reset_allowed


def rederived_tables(spark: SparkSession, graph: PipelineGraph, warehouse: Warehouse,
                     names: Sequence[str]) -> list[str]:
    """The tables `rederive names` resets and recomputes, in the graph's order (see above); a
    RefreshError for a name that is no table, a source, or a protected table whose source is
    younger than it."""
    tables = [t.name for t in graph.tables()]
    unknown = [n for n in dict.fromkeys(names) if n not in tables]
    if unknown:
        raise RefreshError(f"unknown table{'s' if len(unknown) > 1 else ''} "
                           f"{', '.join(f'`{n}`' for n in unknown)}; the pipeline's tables are "
                           f"{', '.join(tables)}")
    # What reads what; a snapshot function is asked by the update, not here.
    dataflow = analyze_graph(spark, graph, stored=StoredTables(warehouse),
                             ask_snapshots=False).dataflow
    sources = [s for s in dataflow.sources() if s in tables]
    named_sources = [n for n in names if n in sources]
    if named_sources:
        raise RefreshError(f"`{named_sources[0]}` reads no table of the pipeline: it is where "
                           "data enters it, the others are derived from it, and it cannot be "
                           "derived again")
    chosen = list(names) or [t for t in tables if t not in sources]
    rebuilt = [t for t in dataflow.downstream(chosen) if t in tables]
    for name in rebuilt:
        if not reset_allowed(graph.table_properties(name)):
            _check_sources_keep_it(warehouse, dataflow, sources, name)
    return rebuilt


def _check_sources_keep_it(warehouse: Warehouse, dataflow: Dataflow, sources: list[str],
                           protected: str) -> None:
    """Refuse to rebuild `protected` from a source created after it."""
    created = delta_log.created_time(warehouse.table_path(protected).resolve())
    if created is None:
        return  # not there yet: nothing to lose
    for source in sources:
        if protected not in dataflow.downstream([source]):
            continue
        born = delta_log.created_time(warehouse.table_path(source).resolve())
        if born is not None and born > created:
            raise RefreshError(
                f"`{protected}` is protected and `{source}`, which it is derived from, was "
                f"created after it: `{source}` may not hold every record `{protected}` was built "
                "from, and rebuilding it would lose them; nothing was reset")
