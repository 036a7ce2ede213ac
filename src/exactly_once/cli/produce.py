"""`exactly-once produce FILE`: publish a `kcat -C -J` JSONL file."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactly_once.cli import common
from exactly_once.errors import CliError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "produce", handle,
                            help="publish a kcat -C -J JSONL file")
    parser.add_argument("file", type=Path)
    common.add_bootstrap_servers(parser)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.kafka.kcat import read_kcat_jsonl
    from exactly_once.kafka.producer import produce_records

    if not args.file.is_file():
        raise CliError(f"no such file: {args.file}")
    settings = common.settings_of(args)
    records = read_kcat_jsonl(args.file)
    common.require_broker(settings.kafka.bootstrap_servers)
    common.ensure_topics(settings)
    sent = produce_records(settings.kafka.bootstrap_servers, records)
    print(f"published {sent:,} records from {args.file}")
    return 0
