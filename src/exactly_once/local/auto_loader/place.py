"""Which flow's query the current thread builds, and where its Auto Loader reads keep state.

Set by hook.building (an update and dry-run, around each flow's function); read by the reader
for the default schema location (pipelines manage it under the flow's checkpoint:
https://docs.databricks.com/aws/en/ingestion/cloud-object-storage/auto-loader/schema) and by
the hook to name the file and dataset of a refused option.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from exactly_once.local.storage.files import StoragePath

_thread = threading.local()  # .place: the Placement of the flow this thread builds


@dataclass
class Placement:
    """Where a read inside a flow's query keeps its state: `checkpoint` the flow's (None in a
    dry run or outside an update), `persist` False when nothing may be written. Reads are
    numbered in the order the flow's code makes them (`next_directory`)."""

    flow: str | None = None
    dataset: str | None = None
    file: str | None = None
    checkpoint: StoragePath | None = None
    persist: bool = False
    reads: int = field(default=0)

    def next_directory(self) -> StoragePath | None:
        number, self.reads = self.reads, self.reads + 1
        return None if self.checkpoint is None else self.checkpoint / "_auto_loader" / str(number)


def placement() -> Placement | None:
    """The flow whose query this thread builds, if any."""
    return getattr(_thread, "place", None)


def set_placement(place: Placement | None) -> None:
    _thread.place = place
