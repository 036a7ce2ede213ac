"""The verdict of a delivery that reached gold (silver holds it), judged in log order from the
key's gold rows and AUTO CDC state (verdicts.py judges the rest).

* current-state topics (`orders`): a delivery whose `(sequence, event_id)` an earlier delivery
  already carried is a redelivery (gold's sequence guard ignores it); one older than the newest
  change delivered before it is stale, and lost to that change; else it is applied (a delete:
  tombstoned) once the SCD1 state holds that sequence or a newer one (else: pending). This
  follows the log, as gold's promise does: the state table stores one change per key per
  micro-batch, so an event superseded within its own batch is applied and superseded, not
  stale, whatever the batches. The SCD2 history adds where it placed the event;
* ledger topics (`player_rewards`): the first delivery in time of an event the ledger holds is
  applied, a later one in time a redelivery of it; a delivery that arrived too late
  (`arrived_late`, silver's column) is late: kept aside in `late_events`, or without effect when
  a delivery in time was applied.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from exactly_once.local.auto_cdc.changes import IS_DELETE, SEQUENCE
from exactly_once.local.auto_cdc.scd2 import END_AT, START_AT
from exactly_once.local.inspect.delivery import (
    APPLIED,
    LATE,
    PENDING,
    REDELIVERY,
    STALE,
    TOMBSTONED,
    Delivery,
    Trail,
    Verdict,
    describe_change,
    sequence_of,
)
from exactly_once.local.inspect.explain_reads import CurrentStateGold, KeyRows, LedgerGold, Row
from exactly_once.transforms.silver import ARRIVED_LATE, VALUE_DIGEST


class GoldVerdict(NamedTuple):
    """What gold says of one delivery silver holds: its verdict, and what the history adds."""

    verdict: Verdict
    notes: tuple[str, ...] = ()


class StoredChange(NamedTuple):
    """The key's change in the SCD1 state table: the newest one gold applied."""

    rank: tuple  # the change's `sequence_by` values, in that order
    deleted: bool


class Carried(NamedTuple):
    """A change a delivery carried into gold, and where that delivery stands in log order."""

    rank: tuple
    place: int  # its index among the deliveries judged
    delivery: Delivery


def judge_current_state(rows: KeyRows, key: str, reached: list[Trail]) -> list[GoldVerdict]:
    """The verdict of each delivery in `reached` (silver holds them; log order) for a
    current-state topic, in that order: a redelivery gold ignored, stale, pending, or applied
    (tombstoned), each with where the SCD2 history placed its change."""
    gold = rows.gold
    assert isinstance(gold, CurrentStateGold)
    topic = rows.topic
    seq_by = topic.sequence_by
    state = [StoredChange(tuple(r[SEQUENCE][c] for c in seq_by), r[IS_DELETE])
             for r in rows.state_rows.get(gold.current, []) if r.get(topic.key) == key]
    stored = max(state, default=None)
    journal = {tuple(r[SEQUENCE][c] for c in seq_by)
               for r in rows.state_rows.get(gold.history, []) if r.get(topic.key) == key}
    versions = sorted((r for r in rows.gold_rows.get(gold.history, [])
                       if r.get(topic.key) == key),
                      key=lambda r: tuple(r[START_AT][c] for c in seq_by))

    verdicts: dict[int, Verdict] = {}
    notes: dict[int, list[str]] = defaultdict(list)
    first_of: dict[tuple, Trail] = {}
    newest: Carried | None = None  # the newest change applied so far, in log order
    applied: list[Carried] = []
    for place, trail in enumerate(reached):
        delivery, row = trail.delivery, trail.silver
        assert row is not None
        rank = sequence_of(row, seq_by)
        deletes = row.get("event_type") in topic.delete_event_types
        if rank in first_of:  # silver let it through
            earlier = first_of[rank].delivery
            newer = newest.rank if newest is not None and newest.rank > rank else None
            verdicts[place] = Verdict(
                REDELIVERY, f"of {earlier.position}, which silver let through "
                f"({_why_not_dropped(first_of[rank], trail)}): {gold.current} ignored it, "
                + (f"older than {describe_change(newer, seq_by)}" if newer else
                   "not newer than itself"), gold.current,
                of=(earlier.partition, earlier.offset),
                lost_to=dict(zip(seq_by, newer, strict=True)) if newer else None)
            continue
        first_of[rank] = trail
        if newest is not None and rank < newest.rank:
            verdicts[place] = Verdict(
                STALE, f"{gold.current} ignored it: older than "
                f"{describe_change(newest.rank, seq_by)}, delivered before it at "
                f"{newest.delivery.position}", gold.current,
                lost_to=dict(zip(seq_by, newest.rank, strict=True)))
        elif stored is None or rank > stored.rank:
            verdicts[place] = Verdict(PENDING, f"{gold.current} has not read it yet",
                                      gold.current)
        else:
            newest = Carried(rank, place, delivery)
            applied.append(newest)
        if rank in journal:
            notes[place].append(_history_note(gold.history, rank, deletes, versions, seq_by))
        elif place not in verdicts or verdicts[place].kind != PENDING:
            notes[place].append(f"{gold.history} has not read it yet")

    verdicts.update(_applied(applied, stored, gold.current, topic.delete_event_types, seq_by))
    return [GoldVerdict(verdicts[place], tuple(notes[place])) for place in range(len(reached))]


def _applied(applied: list[Carried], stored: StoredChange | None, current: str,
             delete_event_types: tuple[str, ...],
             seq_by: tuple[str, ...]) -> dict[int, Verdict]:
    """The verdicts of the changes gold applied (log order), by place: each says what came of
    its row after it (superseded, re-created, still current, or deleted for good)."""
    verdicts = {}
    for i, change in enumerate(applied):
        deletes = change.delivery.event.get("event_type") in delete_event_types
        after = applied[i + 1] if i + 1 < len(applied) else None
        if after is not None:
            then = (f"; re-created by {describe_change(after.rank, seq_by)}" if deletes else
                    f"; superseded by {describe_change(after.rank, seq_by)}")
        elif stored is not None and change.rank == stored.rank:
            then = ("; the key stays deleted (its tombstone keeps older events out)"
                    if deletes else f"; the current row of {current}")
        else:  # the newer change stored has no delivery left in the tables
            then = f"; superseded by {describe_change(stored.rank, seq_by)}" if stored else ""
        verdicts[change.place] = Verdict(
            TOMBSTONED if deletes else APPLIED,
            (f"{describe_change(change.rank, seq_by)} deleted the row of {current}" if deletes
             else f"{describe_change(change.rank, seq_by)} in {current}") + then, current)
    return verdicts


def _why_not_dropped(first: Trail, copy: Trail) -> str:
    """Why silver kept a second delivery of an event: its bytes differ, or it came after
    silver's state had forgotten the first (the watermark delay after its arrival)."""
    if first.parsed is None or copy.parsed is None:
        return "other bytes, or after its watermark"
    if first.parsed[VALUE_DIGEST] != copy.parsed[VALUE_DIGEST]:
        return "other bytes"
    return "the same bytes, after its watermark delay"


def _history_note(history: str, rank: tuple, deletes: bool, versions: list[Row],
                  seq_by: tuple[str, ...]) -> str:
    def at(row: Row, column: str) -> tuple:
        value = row.get(column)
        return () if value is None else tuple(value[c] for c in seq_by)

    if deletes:
        closed = next((v for v in versions if at(v, END_AT) == rank), None)
        if closed is None:
            return f"{history}: a delete, in the journal (no open version to close)"
        return f"{history}: closes the version from {describe_change(at(closed, START_AT), seq_by)}"
    for version in versions:
        start, end = at(version, START_AT), at(version, END_AT)
        if start and start <= rank and (not end or rank < end):
            until = f"until {describe_change(end, seq_by)}" if end else "current"
            return (f"{history}: in the version from {describe_change(start, seq_by)}, "
                    f"{until}")
    return f"{history}: in the journal, in no version (an earlier delete closed it)"


def judge_ledger(rows: KeyRows, key: str, reached: list[Trail]) -> list[GoldVerdict]:
    """The verdict of each delivery in `reached` (silver holds them; log order) for a ledger
    topic, in that order: deliveries in time first (applied, a redelivery, pending), then those
    that arrived too late (late: kept aside or without effect, or pending)."""
    gold = rows.gold
    assert isinstance(gold, LedgerGold)
    ledger = {r["event_id"]: r for r in rows.gold_rows.get(gold.ledger, [])
              if r.get(rows.topic.key) == key}
    kept_aside = {r["event_id"]: r for r in rows.gold_rows.get(gold.late, [])}
    verdicts: dict[int, Verdict] = {}
    in_time: dict[str, Trail] = {}
    for place, trail in enumerate(reached):
        row = trail.silver
        assert row is not None
        event_id = row["event_id"]
        if row.get(ARRIVED_LATE):
            continue
        if event_id in in_time:
            first = in_time[event_id].delivery
            verdicts[place] = Verdict(
                REDELIVERY, f"of {first.position}, which silver let through "
                f"({_why_not_dropped(in_time[event_id], trail)}): {gold.ledger} already holds "
                f"event {event_id}", gold.ledger, of=(first.partition, first.offset))
        elif event_id in ledger:
            in_time[event_id] = trail
            verdicts[place] = Verdict(
                APPLIED, f"event {event_id} in {gold.ledger}: +{ledger[event_id].get('xp')} "
                "XP", gold.ledger)
        else:
            verdicts[place] = Verdict(PENDING, f"{gold.ledger} has not read it yet",
                                      gold.ledger)
    for place, trail in enumerate(reached):
        row = trail.silver
        assert row is not None
        event_id = row["event_id"]
        if not row.get(ARRIVED_LATE):
            continue
        late = f"the broker received it more than {rows.topic.max_event_age} after it occurred"
        if event_id in ledger:
            applied = in_time[event_id].delivery if event_id in in_time else None
            where = f"from {applied.position}, delivered in time" if applied else \
                "from a delivery in time"
            verdicts[place] = Verdict(
                LATE, f"{late}: not applied; the grant was applied {where}", gold.ledger,
                of=(applied.partition, applied.offset) if applied else None)
        elif event_id in kept_aside:
            verdicts[place] = Verdict(
                LATE, f"{late}: kept aside in {gold.late}, not applied", gold.late)
        else:
            verdicts[place] = Verdict(PENDING, f"{gold.late} has not read it yet", gold.late)
    return [GoldVerdict(verdicts[place]) for place in range(len(reached))]
