"""`exactly-once broker start|stop|status`: the local Kafka broker (KRaft, loopback)."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactly_once.cli import common
from exactly_once.paths import BROKER_DIR
from exactly_once.settings.pipeline import load_settings


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "broker", handle,
                            help="start, stop or check the local Kafka broker")
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=common.positive, default=9092)
    parser.add_argument("--home", type=Path, default=BROKER_DIR, help="broker data and logs")


def handle(args: argparse.Namespace) -> int:
    from exactly_once.services import broker

    if args.action == "start":
        info = broker.start(port=args.port, home=args.home)
        print(f"Kafka broker running at {info.bootstrap} (pid {info.pid}, log {info.log_file})")
        common.ensure_topics(load_settings(common.conf_target(args), overrides={
            "exactly_once.kafka.bootstrap_servers": info.bootstrap}))
    elif args.action == "stop":
        print("Kafka broker stopped" if broker.stop(home=args.home) else "no broker was running")
    else:
        running = broker.status(home=args.home)
        if running is None:
            print("no broker running")
            return 3
        print(f"Kafka broker running at {running.bootstrap} (pid {running.pid})")
    return 0
