"""`exactly-once events`: the event log of one update, a line per event (as `databricks
pipelines logs`)."""

from __future__ import annotations

import argparse

from exactly_once.cli import common
from exactly_once.paths import SPARK_LOG


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "events", handle, help="the event log of an update: "
                            "flow progress and timelines")
    parser.add_argument("--update", default="latest", metavar="latest|ID",
                        help="the update (default: the newest); an ID or its start")
    parser.add_argument("--flow", help="only this flow's events")
    common.add_warehouse(parser)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.errors import CliError
    from exactly_once.local.engine import session
    from exactly_once.local.observe import event_view
    from exactly_once.local.storage.warehouse import Warehouse

    warehouse = Warehouse(args.warehouse)
    if not warehouse.event_log_path().is_dir():  # before a JVM starts
        raise CliError(f"no event log in {args.warehouse}; run the pipeline first")
    spark = session.build_session(args.warehouse, log_level="OFF", jvm_log=SPARK_LOG)
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
