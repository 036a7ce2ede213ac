"""`exactly-once events`: the event log of one update, a line per event (as `databricks
pipelines logs`)."""

from __future__ import annotations

import argparse

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "events", handle, help="the event log of an update: "
                            "flow progress and timelines")
    parser.add_argument("--update", default="latest", metavar="latest|ID",
                        help="the update (default: the newest); an ID or its start")
    parser.add_argument("--flow", help="only this flow's events")
    common.add_bundle(parser)
    common.add_warehouse(parser, object_store=True)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.errors import CliError
    from exactly_once.local.inspect import event_view
    from exactly_once.local.storage.warehouse import Warehouse

    warehouse = Warehouse(common.warehouse_of(args))
    if not warehouse.event_log_path().is_dir():  # before a JVM starts
        raise CliError(f"no event log in {warehouse.root}; run the pipeline first")
    spark = common.spark_for(args, warehouse.root)
    try:
        known = event_view.updates(spark, warehouse)
        update = event_view.choose_update(known, args.update)
        lines = event_view.event_lines(spark, warehouse, update, args.flow)
    finally:
        spark.stop()
    print(f"update {update} ({'the newest' if update == known[0] else 'not the newest'} of "
          f"{len(known)}), {len(lines)} events:")
    print("\n".join(lines))
    return 0
