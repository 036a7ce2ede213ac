"""One update at a time per warehouse: an exclusive lock naming its holder.

The lock is `<warehouse>/_pipeline/lock`, which records the holder's pid, host and start time;
a live holder makes a second run fail at once with `WarehouseLockedError` naming it.

- On a local disk it is `flock` on that file. The kernel releases a flock when its process dies,
  however it dies, so a lock left by a killed run is taken over by the next one. `flock` is
  local to one host: a warehouse on a network filesystem shared by several hosts needs a lock
  of that filesystem's own.
- On an object store it is the object itself, created with a conditional write (PUT with
  `If-None-Match: *`): of two updates, exactly one creates it; the other finds the holder. It
  is deleted when the update ends. Nothing releases it when its process dies, so an update
  finding a lock whose holder ran on this host and is gone takes it over, with a conditional
  overwrite of exactly that lock (`If-Match` its ETag): of two such updates one wins. A holder
  on another host cannot be checked from here: the error says to delete the lock once that
  update is known to be dead. A store that ignores or refuses conditional writes cannot give
  one writer per warehouse, so the lock refuses it with one line saying what to use instead.

Delta on S3 allows one writing driver per table (`S3SingleDriverLogStore`): it is this lock
that guarantees it, as an update is one driver.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from exactly_once.errors import WarehouseLockedError
from exactly_once.local.storage.files import (
    ObjectPath,
    PreconditionFailed,
    StoragePath,
    conditional_writes_unsupported,
    location,
)
from exactly_once.local.storage.warehouse import Warehouse


def _record() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": _process_start(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _process_start(pid: int | None = None) -> int | None:
    """When the process started, in clock ticks since boot: with the pid, it names a process
    even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid or os.getpid()}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _holder_gone(holder: dict[str, Any]) -> bool:
    """Whether the holder ran on this host and its process is no longer running."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    started = _process_start(holder["pid"])
    return started is None or started != holder.get("started")


def _locked(warehouse: StoragePath, holder: dict[str, Any], advice: str) -> WarehouseLockedError:
    return WarehouseLockedError(
        f"warehouse {warehouse} is in use by an update of pid {holder.get('pid', '?')} on "
        f"{holder.get('host', '?')} since {holder.get('since', '?')}; {advice}")


class WarehouseLock:
    def __init__(self, warehouse: StoragePath | str):
        self.warehouse = location(warehouse)
        self.path = Warehouse(self.warehouse).lock_path()
        self._file: IO[str] | None = None
        self._object = False

    def __enter__(self) -> WarehouseLock:
        if isinstance(self.path, ObjectPath):
            self._take_object(self.path)
        else:
            self._take_flock(self.path)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._object:
            self.path.unlink(missing_ok=True)
            self._object = False
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()  # no holder recorded while nobody holds it
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    # -- a local disk: flock ------------------------------------------------------------------
    def _take_flock(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(lock)
            lock.close()
            raise _locked(self.warehouse, holder, "wait for it to finish") from None
        lock.seek(0)
        lock.truncate()
        lock.write(json.dumps(_record()))
        lock.flush()
        self._file = lock

    # -- an object store: a conditional create ------------------------------------------------
    def _take_object(self, path: ObjectPath) -> None:
        record = json.dumps(_record()).encode()
        try:
            path.put(record, if_none_match=True)
        except PreconditionFailed:
            self._take_over(path, record)
        self._object = True
        try:  # a store that ignores If-None-Match would let this second create through
            path.put(record, if_none_match=True)
        except PreconditionFailed:
            return
        self.__exit__()
        raise conditional_writes_unsupported(path.store)

    def _take_over(self, path: ObjectPath, record: bytes) -> None:
        """The lock exists: take it over if its holder is known to be gone, else say who has it."""
        try:
            etag, text = path.etag(), path.read_text()
        except FileNotFoundError:  # released in between: try once more from the start
            try:
                path.put(record, if_none_match=True)
                return
            except PreconditionFailed:
                etag, text = path.etag(), path.read_text()
        try:
            holder = json.loads(text or "{}")
        except ValueError:
            holder = {}
        if not _holder_gone(holder):
            raise _locked(self.warehouse, holder, "wait for it to finish; if that update is "
                          f"known to be dead (its machine stopped), delete {path} and run again")
        try:
            path.put(record, if_match=etag)
        except PreconditionFailed:  # another update took it over first
            raise _locked(self.warehouse, holder, "another update took over its lock first") \
                from None


def _holder(lock: IO[str]) -> dict:
    lock.seek(0)
    try:
        return json.loads(lock.read() or "{}")
    except json.JSONDecodeError:
        return {}
