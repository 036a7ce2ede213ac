"""A crash inside an AUTO CDC batch, in this process: between its target commit and its state
commit, the one place where a batch has written its rows and not yet said so."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from exactly_once.local.auto_cdc import commits


@contextmanager
def crash_after_target_commit(monkeypatch):
    """The AUTO CDC batch inside dies right after its target commit (a MERGE, or the append
    into an empty target, or SCD2's replace of its keys' versions), before its state commit."""
    real_merge, real_append, real_replace = (commits.merge_once, commits.append_once,
                                             commits.replace_once)

    def then_crash(write_once):
        def write_then_crash(*args):  # the writes end (..., role, write)
            write_once(*args)
            if args[-2] == "target":
                raise RuntimeError("killed after the target commit")
        return write_then_crash

    monkeypatch.setattr(commits, "merge_once", then_crash(real_merge))
    monkeypatch.setattr(commits, "append_once", then_crash(real_append))
    monkeypatch.setattr(commits, "replace_once", then_crash(real_replace))
    try:
        with pytest.raises(RuntimeError, match="killed"):
            yield
    finally:
        monkeypatch.setattr(commits, "merge_once", real_merge)
        monkeypatch.setattr(commits, "append_once", real_append)
        monkeypatch.setattr(commits, "replace_once", real_replace)
