"""`exactly-once`: the local platform's command line.

    exactly-once broker start|stop|status      a local Apache Kafka broker (KRaft, loopback)
    exactly-once cluster start|stop|status     a local Spark standalone cluster (2 workers)
    exactly-once engine start|stop|status      a resident warm session the commands run in
    exactly-once produce FILE                  publish a `kcat -C -J` JSONL file
    exactly-once generate [--events N ...]     publish a synthetic stream with redeliveries
    exactly-once export-players [--days N ...] write a synthetic daily players export (CSV)
    exactly-once run [--source ...]            one triggered pipeline update into the warehouse
                     [--master spark://...]    ... on a Spark cluster, [--warehouse s3a://...]
    exactly-once rederive [TABLE ...]          rebuild tables from bronze (a contract changed)
    exactly-once dry-run [--pipelines DIR]     validate the pipeline, reading and writing nothing
    exactly-once graph [--format mermaid|...]  the dataflow graph
    exactly-once show TABLE [--limit N]        the first rows of a table of the warehouse
    exactly-once events [--update ID]          the event log of an update, a line per event
    exactly-once explain TABLE KEY             every delivery of a key, from Kafka to gold
    exactly-once quality validate|dashboard    Great Expectations + Data Docs; the HTML dashboard
    exactly-once add-topic NAME --key K ...    a new topic: conf/, pipeline files, JSON Schema
    exactly-once test [PYTEST ARGS]            pytest, in the resident engine when one runs

One module per command, each with `add_parser(subparsers)`; this one only builds the parser
and dispatches, to the resident engine when one runs (engine_client.py). Errors print one line
and exit non-zero; nothing here is meant to end in a traceback.
"""

from __future__ import annotations

import argparse
import sys

from exactly_once.cli import (
    add_topic,
    broker,
    cluster,
    common,
    dry_run,
    engine,
    engine_client,
    events,
    explain,
    export_players,
    generate,
    graph,
    produce,
    quality,
    rederive,
    run,
    show,
    test,
)
from exactly_once.errors import ExactlyOnceError

COMMANDS = (broker, cluster, engine, produce, generate, export_players, run, rederive, dry_run,
            graph, show, events, explain, quality, test, add_topic)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="exactly-once", description=__doc__.split("\n")[0])
    common.bundle_options(parser)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        if engine_client.serves(args):
            return engine_client.forward(sys.argv[1:] if argv is None else argv)
        return args.handler(args)
    except ExactlyOnceError as err:
        print(f"exactly-once: error: {one_line(str(err))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line; `test`'s arguments are pytest's, whatever they look like (`-k x`)."""
    parser = build_parser()
    position = test.position(argv)
    if position is None:
        return parser.parse_args(argv)
    args = parser.parse_args(argv[:position + 1])
    args.pytest_args = argv[position + 1:]
    return args


def one_line(message: str) -> str:
    """A message on one line: a broker's log tail, say, joined with ` | `."""
    return " | ".join(line.strip() for line in message.splitlines() if line.strip())
