"""The one file-system interface of the runtime's own files: local paths and the object store.

Spark reads and writes the tables, checkpoints and state itself (through Hadoop's file systems:
the local one, or S3A for `s3a://`). The runtime also reads and writes files of the warehouse
on its own, without a Spark job: Delta logs (delta_log.py), checkpoints' offsets, commits and
metadata (streams.py), the lock, the reset record and the removal of what a killed run left
(warehouse.py). Those go through a `StoragePath`, which is one of two things with the same
interface:

- a `pathlib.Path`, for a local warehouse: the operating system's files, as before;
- an `ObjectPath` (`s3a://bucket/key`), for a warehouse on an S3-compatible object store,
  through boto3: the subset of `pathlib.Path` the runtime uses (`/`, `name`, `parent`,
  `iterdir`, `read_text`, `read_bytes`, `write_text`, `exists`, `is_file`, `is_dir`, `unlink`,
  `mkdir`, `resolve`, `str()` the URL Spark takes).

What `pathlib` does not offer alike for both is here as functions: `location` (a path or URL
to a `StoragePath`), `remove_tree` and `write_atomic`; `ObjectPath.put` adds the conditional
writes the object-store lock is made of (lock.py). Code above this module never asks which kind of
path it has.

An object store has no directories: a "directory" is the common prefix of the keys under it,
and it exists while one key does. The empty marker objects Hadoop's S3A leaves for
directories it created (`key/`) are listed as the directory they mark, never as a child.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly_once.errors import ObjectStoreError
from exactly_once.settings.engine import ObjectStoreSettings

SCHEME = "s3a"
_PREFIX = f"{SCHEME}://"


@dataclass(frozen=True)
class ObjectStore:
    """One bucket of an S3-compatible store, reached with the settings of `engine.object_store`
    and the credentials of the environment."""

    bucket: str
    settings: ObjectStoreSettings

    @property
    def client(self) -> Any:
        return _client(self.settings, _credentials())

    def where(self) -> str:
        return f"{_PREFIX}{self.bucket} ({self.settings.endpoint or 'Amazon S3'})"


_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def _credentials() -> tuple[str | None, ...]:
    """The environment's credentials now: a client keeps those it was made with."""
    return tuple(os.environ.get(name) for name in _CREDENTIALS)


@functools.cache
def _client(settings: ObjectStoreSettings, credentials: tuple[str | None, ...]) -> Any:
    """One boto3 client per store settings and environment credentials, shared by threads
    (boto3 clients are thread-safe). Each from a session of its own: boto3's default session
    keeps the credentials it resolved first."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3", endpoint_url=settings.endpoint or None, region_name=settings.region,
        config=Config(s3={"addressing_style": "path" if settings.path_style else "auto"},
                      connect_timeout=5, read_timeout=30,
                      retries={"max_attempts": 3, "mode": "standard"}))


@contextmanager
def _errors(store: ObjectStore, key: str) -> Iterator[None]:
    """What boto3 raises as what pathlib raises (a missing object is a FileNotFoundError), or
    as one line naming the store (ObjectStoreError)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as err:
        error = err.response.get("Error", {})
        code = str(error.get("Code", ""))
        if code in ("NoSuchKey", "404", "NotFound"):
            raise FileNotFoundError(f"{_PREFIX}{store.bucket}/{key}") from None
        if code == "NoSuchBucket":
            raise ObjectStoreError(f"no bucket {store.bucket!r} at {store.where()}; "
                                   "create it first") from None
        raise ObjectStoreError(f"{store.where()} refused {key!r}: {code} "
                               f"{error.get('Message', '')}".rstrip()) from None
    except BotoCoreError as err:
        raise ObjectStoreError(f"cannot reach the object store {store.where()}: {err}") from None


class ObjectPath:
    """A key of an object store, with the part of `pathlib.Path`'s interface the runtime uses."""

    def __init__(self, store: ObjectStore, key: str, is_prefix: bool | None = None):
        self.store, self.key = store, key.strip("/")
        self._is_prefix = is_prefix  # known from the listing that found it, else asked

    # -- naming ---------------------------------------------------------------------------------
    def __truediv__(self, name: str) -> ObjectPath:
        return ObjectPath(self.store, f"{self.key}/{name}" if self.key else name)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.store, self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    @property
    def parents(self) -> list[ObjectPath]:
        found, path = [], self
        while path.key:
            path = path.parent
            found.append(path)
        return found

    def resolve(self) -> ObjectPath:
        return self

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def __str__(self) -> str:
        return f"{_PREFIX}{self.store.bucket}/{self.key}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and (self.store, self.key) == (other.store, other.key)

    def __hash__(self) -> int:
        return hash((self.store, self.key))

    # -- reading ----------------------------------------------------------------------------------
    def _list(self, delimiter: bool = True, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The store's listing pages under `key/`."""
        prefix = f"{self.key}/" if self.key else ""
        args: dict[str, Any] = {"Bucket": self.store.bucket, "Prefix": prefix}
        if delimiter:
            args["Delimiter"] = "/"
        if limit:
            args["MaxKeys"] = limit
        with _errors(self.store, prefix):
            for page in self.store.client.get_paginator("list_objects_v2").paginate(**args):
                yield page
                if limit:
                    return

    def iterdir(self) -> Iterator[ObjectPath]:
        """The objects and "directories" directly under this one (none when it has none)."""
        prefix = f"{self.key}/" if self.key else ""
        for page in self._list():
            for common in page.get("CommonPrefixes", []):
                yield ObjectPath(self.store, common["Prefix"], is_prefix=True)
            for item in page.get("Contents", []):
                if item["Key"] != prefix:  # a directory marker is the directory, not a child
                    yield ObjectPath(self.store, item["Key"], is_prefix=False)

    def is_dir(self) -> bool:
        if self._is_prefix is not None:
            return self._is_prefix
        return any(page.get("KeyCount", 0) > 0 for page in self._list(delimiter=False, limit=1))

    def is_file(self) -> bool:
        if self._is_prefix is not None:
            return not self._is_prefix
        try:
            with _errors(self.store, self.key):
                self.store.client.head_object(Bucket=self.store.bucket, Key=self.key)
        except FileNotFoundError:
            return False
        return True

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def read_bytes(self) -> bytes:
        with _errors(self.store, self.key):
            body: bytes = self.store.client.get_object(
                Bucket=self.store.bucket, Key=self.key)["Body"].read()
        return body

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def etag(self) -> str:
        """The object's current ETag (what a conditional overwrite names)."""
        with _errors(self.store, self.key):
            return str(self.store.client.head_object(
                Bucket=self.store.bucket, Key=self.key)["ETag"])

    # -- writing ----------------------------------------------------------------------------------
    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        """One PUT: the object appears whole or not at all."""
        data = text.encode(encoding)
        with _errors(self.store, self.key):
            self.store.client.put_object(Bucket=self.store.bucket, Key=self.key, Body=data)
        return len(data)

    def put(self, data: bytes, if_none_match: bool = False, if_match: str | None = None) -> str:
        """PUT with a precondition: only if the key does not exist (`If-None-Match: *`) or
        only over the object whose ETag is `if_match` (`If-Match`). The new ETag; a failed
        precondition raises `PreconditionFailed`."""
        from botocore.exceptions import ClientError

        args: dict[str, Any] = {"Bucket": self.store.bucket, "Key": self.key, "Body": data}
        if if_none_match:
            args["IfNoneMatch"] = "*"
        if if_match is not None:
            args["IfMatch"] = if_match
        try:
            with _errors(self.store, self.key):
                return str(self.store.client.put_object(**args)["ETag"])
        except ObjectStoreError as err:
            cause = str(err)
            if "PreconditionFailed" in cause or "ConditionalRequestConflict" in cause:
                raise PreconditionFailed(str(self)) from None
            if "NotImplemented" in cause:
                raise conditional_writes_unsupported(self.store) from None
            raise
        except ClientError:  # pragma: no cover - _errors translates every ClientError
            raise

    def unlink(self, missing_ok: bool = False) -> None:
        if not missing_ok and not self.is_file():
            raise FileNotFoundError(str(self))
        with _errors(self.store, self.key):
            self.store.client.delete_object(Bucket=self.store.bucket, Key=self.key)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing: a key's "directories" exist once a key under them does."""

    def remove_tree(self) -> None:
        """Delete every object under this key, in batches of 1,000."""
        keys = [item["Key"] for page in self._list(delimiter=False)
                for item in page.get("Contents", [])]
        with _errors(self.store, self.key):
            for start in range(0, len(keys), 1000):
                self.store.client.delete_objects(Bucket=self.store.bucket, Delete={
                    "Objects": [{"Key": key} for key in keys[start:start + 1000]],
                    "Quiet": True})


class PreconditionFailed(Exception):
    """A conditional write found the object it excluded (or not the version it named)."""


def conditional_writes_unsupported(store: ObjectStore) -> ObjectStoreError:
    return ObjectStoreError(
        f"the object store {store.where()} does not do conditional writes "
        "(PUT with If-None-Match: *), which the warehouse lock is made of; use a store that "
        "does (Amazon S3, MinIO, versitygw) or a warehouse on a local disk")


StoragePath = Path | ObjectPath

_settings = ObjectStoreSettings()
_settings_lock = threading.Lock()


def use_object_store(settings: ObjectStoreSettings) -> None:
    """The settings `location` reaches `s3a://` URLs with from now on (the CLI sets those of
    `engine.object_store` of its target)."""
    global _settings
    with _settings_lock:
        _settings = settings


def location(where: str | os.PathLike[str] | ObjectPath) -> StoragePath:
    """A local path, or an `s3a://bucket/key` URL, as the path the runtime reads it through."""
    if isinstance(where, ObjectPath | Path):
        return where
    text = os.fspath(where)
    if text.startswith(_PREFIX):
        bucket, _, key = text.removeprefix(_PREFIX).partition("/")
        if not bucket:
            raise ObjectStoreError(f"{text} names no bucket: use s3a://BUCKET/PREFIX")
        return ObjectPath(ObjectStore(bucket, _settings), key)
    if "://" in text:
        raise ObjectStoreError(f"{text}: a warehouse is a local directory or s3a://BUCKET/PREFIX "
                               "(Hadoop's S3A connector); other schemes are not supported")
    return Path(text)


def remove_tree(path: StoragePath) -> None:
    """Delete `path` and everything under it; nothing when it does not exist."""
    if isinstance(path, ObjectPath):
        path.remove_tree()
    else:
        shutil.rmtree(path, ignore_errors=True)


def write_atomic(path: StoragePath, text: str) -> None:
    """Write `text` so that a reader sees the old content or the new, never a part: a local
    file through a temporary file renamed into place, an object by one PUT."""
    if isinstance(path, ObjectPath):
        path.write_text(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
