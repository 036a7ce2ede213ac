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


def judge_current_state(rows: KeyRows, key: str, reached: list[Trail]) -> None:
    gold = rows.gold
    assert isinstance(gold, CurrentStateGold)
    topic = rows.topic
    seq_by = topic.sequence_by
    state = [(tuple(r[SEQUENCE][c] for c in seq_by), r[IS_DELETE])
             for r in rows.state_rows.get(gold.current, []) if r.get(topic.key) == key]
    stored = max(state, default=None)  # the key's stored change: the newest applied
    journal = {tuple(r[SEQUENCE][c] for c in seq_by)
               for r in rows.state_rows.get(gold.history, []) if r.get(topic.key) == key}
    versions = sorted((r for r in rows.gold_rows.get(gold.history, [])
                       if r.get(topic.key) == key),
                      key=lambda r: tuple(r[START_AT][c] for c in seq_by))

    first_of: dict[tuple, Trail] = {}
    newest: tuple[tuple, Delivery] | None = None
    applied: list[tuple[tuple, Delivery]] = []
    for trail in reached:
        delivery, row = trail.delivery, trail.silver
        assert row is not None
        rank = sequence_of(row, seq_by)
        deletes = row.get("event_type") in topic.delete_event_types
        if rank in first_of:  # silver let it through
            earlier = first_of[rank].delivery
            newer = newest[0] if newest is not None and newest[0] > rank else None
            delivery.verdict = Verdict(
                REDELIVERY, f"of {earlier.position}, which silver let through "
                f"({_why_not_dropped(first_of[rank], trail)}): {gold.current} ignored it, "
                + (f"older than {describe_change(newer, seq_by)}" if newer else
                   "not newer than itself"), gold.current,
                of=(earlier.partition, earlier.offset),
                lost_to=dict(zip(seq_by, newer, strict=True)) if newer else None)
            continue
        first_of[rank] = trail
        if newest is not None and rank < newest[0]:
            delivery.verdict = Verdict(
                STALE, f"{gold.current} ignored it: older than "
                f"{describe_change(newest[0], seq_by)}, delivered before it at "
                f"{newest[1].position}", gold.current,
                lost_to=dict(zip(seq_by, newest[0], strict=True)))
        elif stored is None or rank > stored[0]:
            delivery.verdict = Verdict(PENDING, f"{gold.current} has not read it yet",
                                       gold.current)
        else:
            newest = (rank, delivery)
            applied.append((rank, delivery))
        if rank in journal:
            delivery.notes.append(_history_note(gold.history, rank, deletes, versions, seq_by))
        elif delivery.verdict is None or delivery.verdict.kind != PENDING:
            delivery.notes.append(f"{gold.history} has not read it yet")

    for i, (rank, delivery) in enumerate(applied):
        deletes = delivery.event.get("event_type") in topic.delete_event_types
        after = applied[i + 1] if i + 1 < len(applied) else None
        if after is not None:
            then = (f"; re-created by {describe_change(after[0], seq_by)}" if deletes else
                    f"; superseded by {describe_change(after[0], seq_by)}")
        elif stored is not None and rank == stored[0]:
            then = ("; the key stays deleted (its tombstone keeps older events out)"
                    if deletes else f"; the current row of {gold.current}")
        else:  # the newer change stored has no delivery left in the tables
            then = f"; superseded by {describe_change(stored[0], seq_by)}" if stored else ""
        delivery.verdict = Verdict(
            TOMBSTONED if deletes else APPLIED,
            (f"{describe_change(rank, seq_by)} deleted the row of {gold.current}" if deletes
             else f"{describe_change(rank, seq_by)} in {gold.current}") + then, gold.current)


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


def judge_ledger(rows: KeyRows, key: str, reached: list[Trail]) -> None:
    gold = rows.gold
    assert isinstance(gold, LedgerGold)
    ledger = {r["event_id"]: r for r in rows.gold_rows.get(gold.ledger, [])
              if r.get(rows.topic.key) == key}
    kept_aside = {r["event_id"]: r for r in rows.gold_rows.get(gold.late, [])}
    in_time: dict[str, Trail] = {}
    for trail in reached:
        delivery, row = trail.delivery, trail.silver
        assert row is not None
        event_id = row["event_id"]
        if row.get(ARRIVED_LATE):
            continue
        if event_id in in_time:
            first = in_time[event_id].delivery
            delivery.verdict = Verdict(
                REDELIVERY, f"of {first.position}, which silver let through "
                f"({_why_not_dropped(in_time[event_id], trail)}): {gold.ledger} already holds "
                f"event {event_id}", gold.ledger, of=(first.partition, first.offset))
        elif event_id in ledger:
            in_time[event_id] = trail
            delivery.verdict = Verdict(
                APPLIED, f"event {event_id} in {gold.ledger}: +{ledger[event_id].get('xp')} "
                "XP", gold.ledger)
        else:
            delivery.verdict = Verdict(PENDING, f"{gold.ledger} has not read it yet",
                                       gold.ledger)
    for trail in reached:
        delivery, row = trail.delivery, trail.silver
        assert row is not None
        event_id = row["event_id"]
        if not row.get(ARRIVED_LATE):
            continue
        late = f"the broker received it more than {rows.topic.max_event_age} after it occurred"
        if event_id in ledger:
            applied = in_time[event_id].delivery if event_id in in_time else None
            where = f"from {applied.position}, delivered in time" if applied else \
                "from a delivery in time"
            delivery.verdict = Verdict(
                LATE, f"{late}: not applied; the grant was applied {where}", gold.ledger,
                of=(applied.partition, applied.offset) if applied else None)
        elif event_id in kept_aside:
            delivery.verdict = Verdict(
                LATE, f"{late}: kept aside in {gold.late}, not applied", gold.late)
        else:
            delivery.verdict = Verdict(PENDING, f"{gold.late} has not read it yet", gold.late)
