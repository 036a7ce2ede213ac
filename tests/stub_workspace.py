"""A stub Databricks workspace on loopback, for the real Databricks CLI's commands that ask one
(`bundle validate`, `bundle init`): who the user is, and that the deploy folder exists. What the
CLI does with the answers is the CLI's own; nothing under test reads this stub. A plugin of
tests/conftest.py (`pytest_plugins`): `workspace` is a fixture of every test module."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from exactly_once.paths import PROJECT_ROOT

CLI = PROJECT_ROOT / ".cache" / "go" / "bin" / "databricks"
USER = "ci@example.com"


class _Workspace(BaseHTTPRequestHandler):
    def _reply(self):
        if self.path.startswith("/api/2.0/preview/scim/v2/Me"):
            code, body = 200, {"userName": USER, "id": "1", "active": True}
        elif self.path.startswith("/api/2.0/workspace/get-status"):
            code, body = 200, {"object_type": "DIRECTORY", "object_id": 1, "path": "/"}
        elif self.path.startswith("/.well-known/"):
            code, body = 404, {"error_code": "NOT_FOUND", "message": "stub workspace"}
        else:
            code, body = 200, {}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = _reply

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def workspace() -> Iterator[str]:
    """The stub's URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Workspace)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def cli_environment(workspace: str, home: Path) -> dict[str, str]:
    """The CLI's environment: the stub as its workspace, a home of its own, no profile."""
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: run `make databricks-cli` (make test does)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABRICKS_", "BUNDLE_VAR_"))}
    return env | {"DATABRICKS_HOST": workspace, "DATABRICKS_TOKEN": "not-a-secret",
                  "HOME": str(home), "DATABRICKS_CONFIG_FILE": str(home / "none.cfg")}
