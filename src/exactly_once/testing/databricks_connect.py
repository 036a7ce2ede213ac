"""Databricks Connect, locally: in a pytest session, `from databricks.connect import
DatabricksSession` is this module's when databricks-connect is not installed, and its
`DatabricksSession.builder.getOrCreate()` is the session's local Spark session
(local_session.py), the one the `spark` fixture gives. So the tests of Databricks' templates
run as they are written: their conftest's `spark` fixture and `databricks.sdk.runtime.spark`
both ask Databricks Connect for a session.

databricks-connect ships a pyspark of its own (Spark Connect only), which cannot share an
environment with the runtime's; where it is installed anyway, it is the one imported. The
builder's settings choose a workspace's compute (a cluster, serverless, a host, a token, a
profile, headers, the session's validation against that compute): a local session runs on this
machine whatever they say, as `dry-run` lists a pipeline's compute settings as not applied
locally. A builder's method that Databricks Connect does not have is an AttributeError, as there.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MODULE = "databricks.connect"


class _NewBuilder:
    """`DatabricksSession.builder`: a new builder each time it is read, as in Databricks
    Connect."""

    def __get__(self, instance: Any, owner: type[DatabricksSession]) -> DatabricksSession.Builder:
        return owner.Builder()


class DatabricksSession:
    """`DatabricksSession.builder....getOrCreate()`: the pytest session's local Spark session."""

    builder = _NewBuilder()

    class Builder:
        """Databricks Connect's builder. Its settings choose a workspace's compute, which a
        local session does not have: each returns the builder, as there."""

        def remote(self, conn_string: str | None = None, *, host: str | None = None,
                   cluster_id: str | None = None, token: str | None = None,
                   user_agent: str = "", headers: dict[str, str] | None = None,
                   serverless: bool = False) -> DatabricksSession.Builder:
            return self

        def host(self, host: str) -> DatabricksSession.Builder:
            return self

        def clusterId(self, clusterId: str) -> DatabricksSession.Builder:  # noqa: N802, N803
            return self

        def serverless(self, enabled: bool = True) -> DatabricksSession.Builder:
            return self

        def headers(self, headers: dict[str, str]) -> DatabricksSession.Builder:
            return self

        def header(self, header_name: str, header_value: str) -> DatabricksSession.Builder:
            return self

        def token(self, token: str) -> DatabricksSession.Builder:
            return self

        def sdkConfig(self, config: Any) -> DatabricksSession.Builder:  # noqa: N802
            return self

        def profile(self, profile: str) -> DatabricksSession.Builder:
            return self

        def userAgent(self, userAgent: str) -> DatabricksSession.Builder:  # noqa: N802, N803
            return self

        def validateSession(self, enabled: bool = True) -> DatabricksSession.Builder:  # noqa: N802
            return self

        def getOrCreate(self) -> SparkSession:  # noqa: N802
            """The pytest session's local session, built on first use."""
            from exactly_once.testing import local_session

            return local_session.get_or_create()

        def create(self) -> SparkSession:
            """A new session of the same local Spark (its own temporary views and SQL
            settings, the same tables), as Databricks Connect's `create` is a new session."""
            from exactly_once.testing import local_session

            return local_session.new_session()


class _LocalConnectFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `databricks.connect` only where nothing before it on `sys.meta_path` does."""

    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != MODULE:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin=__name__)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.DatabricksSession = DatabricksSession  # type: ignore[attr-defined]
        module.__all__ = ["DatabricksSession"]  # type: ignore[attr-defined]


def install() -> None:
    """`databricks.connect` resolvable as this module's, after every other finder (once)."""
    if not any(isinstance(f, _LocalConnectFinder) for f in sys.meta_path):
        sys.meta_path.append(_LocalConnectFinder())
