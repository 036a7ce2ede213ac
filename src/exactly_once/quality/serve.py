"""The dashboard served over HTTP while the pipeline runs (`quality dashboard --serve`).

Standard library only (http.server), on the loopback interface. The page carries a
`<meta http-equiv="refresh">`, so the browser asks again every few seconds; a request rebuilds it
when the event log has a commit the page has not shown (a continuous run commits one per update),
else serves the page as built. Delta readers see whole commits, so a rebuild while an update runs
shows the updates finished so far. `/explain` answers the page's search box (explain_page.py).
Other paths are files next to the page (the Data Docs it links).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs

from exactly_once.errors import ExactlyOnceError
from exactly_once.local.storage.delta_log import latest_version
from exactly_once.local.storage.files import StoragePath

HOST = "127.0.0.1"


class LivePage:
    """The page at `output`, rebuilt by `build` whenever the Delta table at `watched` moved on."""

    def __init__(self, output: Path, watched: StoragePath, build: Callable[[], object]):
        self.output, self.watched, self._build = output, watched, build
        self.built_version: int | None = None
        self._lock = threading.Lock()

    def build(self) -> None:
        """Build the page now (errors raise: the first build's error is the command's)."""
        with self._lock:
            version = latest_version(self.watched)
            self._build()
            self.built_version = version

    def current(self) -> bytes:
        """The page, rebuilt first if the watched table has a commit it has not shown."""
        if latest_version(self.watched) != self.built_version:
            try:
                self.build()
            except ExactlyOnceError as err:  # keep the last page; say why, in one line
                print(f"exactly-once: dashboard not rebuilt: {err}", file=sys.stderr)
        return self.output.read_bytes()


# A search of the page's box (`table`, `key`) -> the explanation's page (explain_page.py).
Explain = Callable[[dict[str, str]], str]


class _Handler(SimpleHTTPRequestHandler):
    page: LivePage
    explain: Explain | None = None

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path, _, query = self.path.partition("?")
        if path == "/explain" and self.explain is not None:
            search = {name: values[0] for name, values in parse_qs(query).items()}
            return self._send(self.explain(search).encode("utf-8"))
        if path not in ("/", f"/{self.page.output.name}"):
            return super().do_GET()
        self._send(self.page.current())

    def _send(self, body: bytes) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # one line per request would bury the command's own output


def dashboard_server(page: LivePage, port: int, explain: Explain | None = None) -> HTTPServer:
    """A server of `page` on HOST:`port` (0: any free port); run it with serve_forever().
    `explain`: answers the page's search box at `/explain?table=...&key=...`."""
    handler = type("DashboardHandler", (_Handler,), {
        "page": page, "explain": staticmethod(explain) if explain else None})
    return HTTPServer((HOST, port), partial(handler, directory=str(page.output.parent)))
