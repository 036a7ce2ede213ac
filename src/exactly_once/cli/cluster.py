"""`exactly-once cluster start|stop|status`: a Spark standalone cluster on this machine (a master
and one-core workers on 127.0.0.1, services/cluster.py) for `run --master spark://...`."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactly_once.cli import common
from exactly_once.paths import CLUSTER_DIR


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "cluster", handle,
                            help="start, stop or check a local Spark standalone cluster")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=common.positive, default=7077, help="the master's port")
    parser.add_argument("--workers", type=common.positive, default=2,
                        help="one-core workers to start (default: 2)")
    parser.add_argument("--home", type=Path, default=CLUSTER_DIR,
                        help="pids, logs and work dirs (default: .local/cluster)")


def handle(args: argparse.Namespace) -> int:
    from exactly_once.services import cluster

    if args.action == "start":
        info = cluster.start(args.home, port=args.port, workers=args.workers)
        print(f"Spark master at {info.url} with {len(info.workers)} workers (web UI {info.ui}, "
              f"logs {info.home / 'logs'}); run on it with `exactly-once run --master {info.url}`")
    elif args.action == "stop":
        print("Spark cluster stopped" if cluster.stop(args.home) else "no cluster was running")
    else:
        running = cluster.status(args.home)
        if running is None:
            print("no cluster running")
            return 3
        cluster.check(running)
        print(f"Spark master at {running.url} with {len(running.workers)} workers alive "
              f"(web UI {running.ui})")
    return 0
