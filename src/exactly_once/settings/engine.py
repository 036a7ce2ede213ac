"""Where the local runtime runs (`engine:` in conf/): not pipeline settings, Databricks brings
its own compute."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from exactly_once.errors import SettingsError
from exactly_once.paths import CONF_DIR
from exactly_once.settings.conf_files import target_document

_MASTER = re.compile(r"^(local(\[(\d+|\*)\])?|spark://[^\s:/,]+:\d{1,5})$")


@dataclass(frozen=True)
class ObjectStoreSettings:
    """How the runtime reaches a warehouse on an object store (`s3a://bucket/prefix`). The
    credentials are never settings: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and
    AWS_SESSION_TOKEN) in the environment, read by Hadoop's S3A connector and the runtime's
    own S3 client alike."""

    endpoint: str = ""  # "" is Amazon S3; http://127.0.0.1:PORT a local S3-compatible server
    region: str = "us-east-1"
    path_style_access: bool = False  # bucket in the path, not the host name (any endpoint: yes)

    @property
    def path_style(self) -> bool:
        """S3-compatible servers at an endpoint of their own serve buckets in the path."""
        return self.path_style_access or bool(self.endpoint)


@dataclass(frozen=True)
class EngineSettings:
    """`engine:` in conf/: the Spark master an update runs on and the driver's address."""

    master: str = "local[2]"  # local[N], or spark://HOST:PORT of a standalone master
    driver_host: str = ""  # the address executors reach the driver at ("": Spark's choice)
    driver_bind_address: str = ""  # the address the driver listens on ("": driver_host)
    executor_memory: str = "1g"  # per executor, on a cluster
    object_store: ObjectStoreSettings = field(default_factory=ObjectStoreSettings)


def check_master(master: str) -> str:
    """`local`, `local[N]`, `local[*]` or `spark://HOST:PORT`, else a SettingsError."""
    if not _MASTER.match(master.strip()):
        raise SettingsError(f"master must be local[N] or spark://HOST:PORT, got {master!r}")
    return master.strip()


def load_engine(target: str = "local", conf_dir: Path = CONF_DIR,
                master: str | None = None) -> EngineSettings:
    """`engine:` of conf/base.yml + conf/targets/<target>.yml; `master` (`run --master`)
    over the configured one."""
    doc = target_document(target, conf_dir).get("engine") or {}
    store = dict(doc.get("object_store") or {})
    unknown = (set(doc) - {f.name for f in dataclasses.fields(EngineSettings)}) | (
        set(store) - {f.name for f in dataclasses.fields(ObjectStoreSettings)})
    if unknown:
        raise SettingsError(f"engine settings have unknown keys {sorted(unknown)}")
    if not isinstance(store.get("path_style_access", False), bool):
        raise SettingsError("setting engine.object_store.path_style_access must be true or false")
    text = {key: "" if value is None else str(value) for key, value in doc.items()
            if key != "object_store"}
    # No endpoint configured: the AWS SDKs' own variable (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)
    # names one, as for the local S3 server (`make s3-start`).
    store["endpoint"] = str(store.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3")
                            or os.environ.get("AWS_ENDPOINT_URL") or "")
    return EngineSettings(
        **(text | {"master": check_master(master or text.get("master") or "local[2]")}),
        object_store=ObjectStoreSettings(**store))
