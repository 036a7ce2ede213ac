"""`exactly-once show TABLE`: the first rows of a table of the local warehouse."""

from __future__ import annotations

import argparse

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "show", handle, help="preview a table of the warehouse")
    parser.add_argument("table")
    parser.add_argument("--limit", type=common.positive, default=20, metavar="N")
    common.add_warehouse(parser, object_store=True)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.local.inspect import preview
    from exactly_once.local.storage.warehouse import Warehouse

    warehouse = Warehouse(common.warehouse_of(args))
    preview.require_table(warehouse, args.table)  # before a JVM starts
    spark = common.spark_for(args, warehouse.root)
    try:
        df, version, rows = preview.table(spark, warehouse, args.table)
        print(f"{args.table}: {rows:,} rows (Delta version {version}); the first "
              f"{min(rows, args.limit):,}:")
        df.show(args.limit, truncate=40)
    finally:
        spark.stop()
    return 0
