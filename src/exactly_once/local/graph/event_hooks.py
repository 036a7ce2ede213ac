"""Event hooks (`@dp.on_event_hook`): Python functions of the pipeline called with each event the
update writes to its event log, as Databricks calls them
(https://docs.databricks.com/aws/en/ldp/event-hooks, Public Preview).

- a hook is a function of one argument, the event as a dictionary (the event log row's fields:
  `id`, `origin`, `timestamp`, `level`, `event_type`, `message`, `error`, `details`);
- every hook is called with every event of the update, one hook at a time, in the order they
  were declared, never with a `hook_progress` event (what the hooks did, written after them);
- a hook that raises has failed; more consecutive failures than its
  `max_allowable_consecutive_failures` (an integer >= 0; None, the default: no limit) disable it
  until the pipeline starts again (locally: the next update, which loads the files again);
- no hook fails the update.

Locally the update writes its events when its flows are done (observe/event_log.py), and the
hooks are called then, before `run` returns: unlike Databricks, which calls them while the
update goes on and does not promise every hook sees every event before its compute stops,
every event reaches every enabled hook.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from exactly_once.errors import DeclarationError, first_line

HOOK_PROGRESS = "hook_progress"
Event = dict[str, Any]


@dataclass(frozen=True)
class EventHook:
    name: str
    func: Callable[[Event], object]
    max_allowable_consecutive_failures: int | None = None


@dataclass
class HookRun:
    """What one hook did in an update."""

    hook: EventHook
    processed: int = 0  # events it took without raising
    failures: int = 0
    consecutive: int = 0
    disabled: bool = False
    last_error: str | None = None

    @property
    def status(self) -> str:
        return "DISABLED" if self.disabled else "FAILED" if self.failures else "COMPLETED"


def on_event_hook(register: Callable[[EventHook], None]
                  ) -> Callable[..., Any]:
    """`dp.on_event_hook`, bare or with `max_allowable_consecutive_failures`, registering the
    hook with `register`; the function is returned as it was."""
    def declare(func: Callable[[Event], object] | None = None, *,
                max_allowable_consecutive_failures: int | None = None) -> Any:
        limit = max_allowable_consecutive_failures

        def decorate(hook: Callable[[Event], object]) -> Callable[[Event], object]:
            name = str(getattr(hook, "__name__", "event_hook"))
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                      or limit < 0):
                raise DeclarationError("on_event_hook: max_allowable_consecutive_failures must "
                                       f"be an integer >= 0 or None, got {limit!r}", dataset=name)
            try:
                inspect.signature(hook).bind({})
            except (TypeError, ValueError):
                raise DeclarationError(f"on_event_hook: `{name}` must be a function of one "
                                       "argument, the event", dataset=name) from None
            register(EventHook(name, hook, limit))
            return hook

        return decorate if func is None else decorate(func)

    return declare


def run_hooks(hooks: Sequence[EventHook], events: Sequence[Event]) -> list[HookRun]:
    """Each hook called with each event (each a copy of its own), hook_progress events left
    out; what each did."""
    runs = [HookRun(hook) for hook in hooks]
    for event in events:
        if event.get("event_type") == HOOK_PROGRESS:
            continue
        for run in runs:
            if run.disabled:
                continue
            try:
                run.hook.func(copy.deepcopy(event))
            except Exception as err:  # noqa: BLE001 - a hook's failure is counted, never raised
                run.failures += 1
                run.consecutive += 1
                run.last_error = f"{type(err).__name__}: {first_line(err)}"
                limit = run.hook.max_allowable_consecutive_failures
                run.disabled = limit is not None and run.consecutive > limit
            else:
                run.processed += 1
                run.consecutive = 0
    return runs
