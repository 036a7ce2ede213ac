"""`exactly-once engine start|stop|status`: the resident engine, a warm Spark session that the
commands using Spark run in while it is up (services/engine.py, cli/engine_server.py). Its
socket, pid and log are in ENGINE_DIR (`.local/engine/`, under EXACTLY_ONCE_HOME when set),
where the commands look."""

from __future__ import annotations

import argparse

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "engine", handle,
                            help="start, stop or check the resident engine (a warm session)")
    parser.add_argument("action", choices=["start", "stop", "status"])


def handle(args: argparse.Namespace) -> int:
    from exactly_once.services import engine

    if args.action == "start":
        info = engine.start()
        print(f"Engine running (pid {info.pid}, socket {info.socket}, log {info.log}): commands "
              f"using Spark run in its warm session")
    elif args.action == "stop":
        print("Engine stopped" if engine.stop() else "no engine was running")
    else:
        running = engine.status()
        if running is None:
            print("no engine running")
            return 3
        print(f"Engine running (pid {running.pid}, socket {running.socket})")
    return 0
