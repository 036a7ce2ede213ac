"""A local S3-compatible object store to put a warehouse on: Versity's S3 gateway (versitygw).

A real store, not a mock: versitygw serves the S3 API over a directory (its `posix` backend:
a bucket is a directory, an object a file), with conditional writes (`If-None-Match`,
`If-Match`). `make s3-server` builds it from its Go module (`.cache/go/bin/versitygw`); this
module starts and stops it on 127.0.0.1, detached, through the services' one lifecycle
(lifecycle.py). Not used by the runtime itself: the runtime reaches any S3-compatible store
through local/storage/files.py and S3A.

    home/s3.json       pid, port and bucket of the running server (the pid file)
    home/data/<bucket> the objects
    home/logs/s3.out   the server's output

Its credentials are local ones the server is started with; a client gets them as
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY with AWS_ENDPOINT_URL (`environment()`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from exactly_once.errors import ObjectStoreError
from exactly_once.paths import PROJECT_ROOT
from exactly_once.services import lifecycle
from exactly_once.services.processes import HOST

SERVER = PROJECT_ROOT / ".cache" / "go" / "bin" / "versitygw"
ACCESS_KEY = "exactly-once"
SECRET_KEY = "exactly-once-local-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    home: Path
    port: int
    pid: int
    bucket: str

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def environment(self) -> dict[str, str]:
        """What a client (the CLI, Spark's S3A, boto3) needs to reach this store."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}


def _state(home: Path) -> lifecycle.StateFile:
    return lifecycle.StateFile(home / "s3.json")


def _log(home: Path) -> Path:
    return home / "logs" / "s3.out"


def status(home: Path) -> S3Server | None:
    home = Path(home).resolve()
    state = _state(home).read()
    if state is None:
        return None
    server = S3Server(home, state["port"], state["pid"], state["bucket"])
    return server if lifecycle.runs(server.pid, b"versitygw") else None


def start(home: Path, port: int, bucket: str = "lake", timeout: float = 30) -> S3Server:
    """Start the server for `home` on `port` with `bucket` in it; one already running there on
    that port with that bucket is returned as it is, on another it is an error."""
    home = Path(home).resolve()
    running = status(home)
    if running is not None:
        if (running.port, running.bucket) != (port, bucket):
            raise ObjectStoreError(f"the S3 server in {home} is already running on port "
                                   f"{running.port} with bucket {running.bucket}")
        return running
    if not SERVER.is_file():
        raise ObjectStoreError(f"no S3 server at {SERVER}; run `make s3-server` first")
    if lifecycle.port_answers(port):
        raise ObjectStoreError(f"port {port} is already in use by another process")
    (home / "data" / bucket).mkdir(parents=True, exist_ok=True)  # a directory is a bucket
    env = os.environ | {"ROOT_ACCESS_KEY_ID": ACCESS_KEY, "ROOT_SECRET_ACCESS_KEY": SECRET_KEY}
    process = lifecycle.launch(
        [str(SERVER), "--port", f"{HOST}:{port}", "--region", REGION, "--quiet",
         "posix", str(home / "data")], _log(home), env=env)
    server = S3Server(home, port, process.pid, bucket)
    _state(home).write({"port": port, "pid": process.pid, "bucket": bucket})

    def not_started() -> str:
        stop(home)
        log = [line.strip() for line in lifecycle.log_lines(_log(home)) if line.strip()]
        return f"the S3 server did not start on port {port}: {log[-1] if log else '(no output)'}"

    lifecycle.wait_ready(lambda: lifecycle.port_answers(port),
                         lambda: None if process.poll() is None else not_started(),
                         timeout, not_started, ObjectStoreError, poll=0.1)
    return server


def stop(home: Path, timeout: float = 10) -> bool:
    home = Path(home).resolve()
    running = status(home)
    _state(home).remove()
    if running is None:
        return False
    lifecycle.stop_process(running.pid, timeout, b"versitygw")
    return True


def main(argv: list[str] | None = None) -> int:
    """`python -m exactly_once.services.s3_server start|stop [PORT]` (make s3-start)."""
    import sys

    from exactly_once.paths import LOCAL_DIR

    args = sys.argv[1:] if argv is None else argv
    home = LOCAL_DIR / "s3"
    try:
        if args[:1] == ["start"]:
            server = start(home, int(args[1]) if len(args) > 1 else 9000)
            print(f"S3-compatible server (versitygw) at {server.endpoint}, bucket "
                  f"s3a://{server.bucket}, data in {home / 'data'}; to use it:")
            for key, value in server.environment().items():
                print(f"  export {key}={value}")
        elif args[:1] == ["stop"]:
            print("S3 server stopped" if stop(home) else "no S3 server was running")
        else:
            print("usage: python -m exactly_once.services.s3_server start [PORT] | stop")
            return 2
    except ObjectStoreError as err:
        print(f"exactly-once: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
