"""A streaming checkpoint's state store files, read directly: how far each store is from its
last snapshot.

With RocksDB changelog checkpointing (engine/session.py) a commit writes only the keys it
changed (`<version>.changelog`); loading a store replays every changelog since its latest
snapshot (`<version>.zip`). Spark makes snapshots from a background maintenance task (every
`spark.sql.streaming.stateStore.maintenanceInterval`, 60 s) for queries that are running,
and a store that closes drops the snapshot it had queued. An update's queries run for seconds,
so a process that runs one update (a CLI command) never writes one: each update's loads would
replay the whole history. The update decides from these files when its stores take a snapshot
(execution/pipeline.py, engine/update_settings.py).

Layout: `<checkpoint>/state/<operator>/<partition>/[<store>/]<version>[_<id>].(zip|changelog)`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from exactly_once.local.storage.files import StoragePath

_STATE_FILE = re.compile(r"^(\d+)(?:_[^.]+)?\.(zip|changelog)$")


def _store_dirs(directory: StoragePath) -> Iterator[tuple[StoragePath, list[str]]]:
    """Each directory under `directory` with the names of the files in it."""
    try:
        entries: list[StoragePath] = list(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return
    yield directory, [e.name for e in entries if not e.is_dir()]
    for entry in entries:
        if entry.is_dir():
            yield from _store_dirs(entry)


def versions_since_snapshot(checkpoint: StoragePath) -> int:
    """The most versions any state store of `checkpoint` has committed since its latest
    snapshot (all of them when it has none); 0 for a checkpoint without state."""
    most = 0
    for _, names in _store_dirs(checkpoint / "state"):
        latest = snapshot = 0
        for match in filter(None, map(_STATE_FILE.match, names)):
            version = int(match.group(1))
            latest = max(latest, version)
            if match.group(2) == "zip":
                snapshot = max(snapshot, version)
        most = max(most, latest - snapshot)
    return most
