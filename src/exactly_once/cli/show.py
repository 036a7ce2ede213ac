"""`exactly-once show TABLE`: the first rows of a table of the local warehouse."""

from __future__ import annotations

import argparse

from exactly_once.cli import common
from exactly_once.paths import SPARK_LOG


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "show", handle, help="preview a table of the warehouse")
    parser.add_argument("table")
    parser.add_argument("--limit", type=common.positive, default=20, metavar="N")
    common.add_warehouse(parser)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.local.engine import session
    from exactly_once.local.observe import preview
    from exactly_once.local.storage.warehouse import Warehouse

    warehouse = Warehouse(args.warehouse)
    preview.require_table(warehouse, args.table)  # before a JVM starts
    spark = session.build_session(args.warehouse, log_level="OFF", jvm_log=SPARK_LOG)
    try:
        df, version, rows = preview.table(spark, warehouse, args.table)
        print(f"{args.table}: {rows:,} rows (Delta version {version}); the first "
              f"{min(rows, args.limit):,}:")
        df.show(args.limit, truncate=40)
    finally:
        spark.stop()
    return 0
