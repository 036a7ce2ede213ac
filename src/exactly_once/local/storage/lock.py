"""One update at a time per warehouse: an exclusive lock naming its holder.

The lock is `flock` on `<warehouse>/_pipeline/lock`, which records the holder's pid, host and
start time. The kernel releases a flock when its process dies, however it dies, so a lock left
by a killed run is taken over by the next one; a live holder makes a second run fail at once
with `WarehouseLockedError` naming it. `flock` is local to one host: a warehouse on
a network filesystem shared by several hosts needs a lock of that filesystem's own.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from exactly_once.errors import WarehouseLockedError
from exactly_once.local.storage.warehouse import Warehouse


class WarehouseLock:
    def __init__(self, warehouse: Path):
        self.warehouse = Path(warehouse)
        self.path = Warehouse(self.warehouse).lock_path()
        self._file: IO[str] | None = None

    def __enter__(self) -> WarehouseLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(lock)
            lock.close()
            raise WarehouseLockedError(
                f"warehouse {self.warehouse} is in use by an update of "
                f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since "
                f"{holder.get('since', '?')}; wait for it to finish") from None
        lock.seek(0)
        lock.truncate()
        lock.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                               "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
        lock.flush()
        self._file = lock
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()  # no holder recorded while nobody holds it
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def _holder(lock: IO[str]) -> dict:
    lock.seek(0)
    try:
        return json.loads(lock.read() or "{}")
    except json.JSONDecodeError:
        return {}
