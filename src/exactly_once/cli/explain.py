"""`exactly-once explain TABLE KEY` / `explain --event EVENT_ID`: what happened to every delivery
of a key (or of an event), from Kafka to gold, read from the warehouse's tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactly_once.cli import common
from exactly_once.paths import SPARK_LOG


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "explain", handle, help="what happened to every "
                            "delivery of a key (or an event), from Kafka to gold")
    parser.add_argument("table", nargs="?", help="a table of the key's topic, e.g. orders")
    parser.add_argument("key", nargs="?", help="the key (the Kafka key: order_id, player_id)")
    parser.add_argument("--event", metavar="EVENT_ID", help="explain one event instead")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    common.add_bundle(parser)
    common.add_warehouse(parser)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.local.engine import session
    from exactly_once.local.inspect import explain
    from exactly_once.local.inspect.explain_text import as_json, as_text

    if (args.event is None) == (args.key is None):  # TABLE KEY, or --event alone
        args.parser.error("give TABLE KEY, or --event EVENT_ID")
    settings = common.settings_of(args)
    warehouse = Path(str(common.warehouse_of(args)))  # the bundle pipeline's, by default
    explain.require_warehouse(warehouse)  # before a JVM starts
    if args.event is None:
        explain.explainable_topic(warehouse, settings, args.table)
    spark = session.build_session(warehouse, log_level="OFF", jvm_log=SPARK_LOG)
    try:
        explanation = (explain.explain_event(spark, warehouse, settings, args.event)
                       if args.event is not None else
                       explain.explain_key(spark, warehouse, settings, args.table, args.key))
    finally:
        spark.stop()
    print(as_json(explanation) if args.format == "json" else as_text(explanation))
    return 0
