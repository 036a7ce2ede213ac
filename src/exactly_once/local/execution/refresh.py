"""Which tables an update refreshes and which it resets, as `databricks bundle run` selects them.

    (nothing)               every table updated incrementally
    --refresh T ...         only the tables named, incrementally; the others are read as they are
    --full-refresh T ...    the tables named are reset (data, checkpoints, AUTO CDC state) and
                            recomputed; with --refresh, both sets are updated
    --full-refresh-all      every table reset and recomputed, except the protected ones
    rederive T ...          the tables named reset and recomputed, protected ones included
                            (rederive.py chooses them: what is derived from bronze); every
                            other table updated incrementally

A table with `pipelines.reset.allowed = false` is protected: `--full-refresh-all` updates it
incrementally instead, and naming it in `--full-refresh` is an error, as on Databricks.

Sinks (`dp.create_sink`) are not tables: an update of the whole pipeline (no --refresh or
--full-refresh selection) updates them, and --full-refresh-all restarts their flows (their
checkpoints forgotten: they read their sources from the start) without clearing them, so what
they read again is appended, as Databricks' sink reference notes. A selection leaves them alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from exactly_once.errors import RefreshError
from exactly_once.local.catalog.names import NameSyntaxError
from exactly_once.local.graph.registry import PipelineGraph
from exactly_once.table_properties import RESET_ALLOWED, reset_allowed


@dataclass(frozen=True)
class RefreshSelection:
    refresh: tuple[str, ...] = ()
    full_refresh: tuple[str, ...] = ()
    full_refresh_all: bool = False
    rederive: tuple[str, ...] = ()  # re-derived from bronze: reset, protected or not

    @classmethod
    def of(cls, full_refresh: bool | Sequence[str] = False,
           refresh: Sequence[str] = ()) -> RefreshSelection:
        """`full_refresh=True` is --full-refresh-all; a list of names is --full-refresh T ..."""
        if isinstance(full_refresh, bool):
            return cls(refresh=tuple(refresh), full_refresh_all=full_refresh)
        return cls(refresh=tuple(refresh), full_refresh=tuple(full_refresh))


def _named(graph: PipelineGraph, names: tuple[str, ...]) -> tuple[str, ...]:
    """Tables named as the user may name them (`orders`, `main.sales.orders`, `gold.orders`),
    as the pipeline names them (names.py: `main.sales.orders` is `orders` in a pipeline of
    `main.sales`)."""
    def named(name: str) -> str:
        try:
            return graph.namespace.dataset_name(name)
        except NameSyntaxError:
            return name  # the unknown-table line names it as it was written
    return tuple(named(n) for n in names)


@dataclass(frozen=True)
class RefreshPlan:
    update: list[str]  # in the graph's order
    reset: list[str]
    sinks: list[str] = field(default_factory=list)  # the sinks updated
    restart_sinks: bool = False  # --full-refresh-all: their flows read from the start

    def with_reset(self, graph: PipelineGraph, tables: list[str]) -> RefreshPlan:
        """Also reset and recompute `tables` (those the pipeline still has)."""
        names = [t.name for t in graph.tables()]
        return replace(self, update=[t for t in names if t in {*self.update, *tables}],
                       reset=[t for t in names if t in {*self.reset, *tables}])


def plan_refresh(graph: PipelineGraph, selection: RefreshSelection) -> RefreshPlan:
    tables = [t.name for t in graph.tables()]
    selection = replace(selection, refresh=_named(graph, selection.refresh),
                        full_refresh=_named(graph, selection.full_refresh))
    if selection.rederive:
        return RefreshPlan(update=tables, reset=[t for t in tables if t in selection.rederive])
    if selection.full_refresh_all and (selection.refresh or selection.full_refresh):
        raise RefreshError("--full-refresh-all cannot be combined with --refresh or "
                           "--full-refresh")
    unknown = [n for n in dict.fromkeys([*selection.refresh, *selection.full_refresh])
               if n not in tables]
    if unknown:  # all of them at once: one correction, not one per run
        raise RefreshError(f"unknown table{'s' if len(unknown) > 1 else ''} "
                           f"{', '.join(f'`{n}`' for n in unknown)}; the pipeline's tables are "
                           f"{', '.join(tables)}")
    for name in selection.full_refresh:
        if not reset_allowed(graph.table_properties(name)):
            raise RefreshError(f"`{name}` is protected ({RESET_ALLOWED} = false): a full refresh "
                               "would erase what Kafka no longer holds; use --refresh instead")
    sinks = [s.name for s in graph.sinks()]
    if selection.full_refresh_all:
        return RefreshPlan(update=tables, reset=[
            t for t in tables if reset_allowed(graph.table_properties(t))], sinks=sinks,
            restart_sinks=True)
    if selection.refresh or selection.full_refresh:
        chosen = {*selection.refresh, *selection.full_refresh}
        return RefreshPlan(update=[t for t in tables if t in chosen],
                           reset=[t for t in tables if t in selection.full_refresh])
    return RefreshPlan(update=tables, reset=[], sinks=sinks)
