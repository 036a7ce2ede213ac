"""`exactly-once show TABLE`: a table's rows, by any name the pipeline's code could use
(`orders`, `schema.orders`, `catalog.schema.orders`, a table of the local catalog): the first
rows as a table, or every row as JSON (an array of row objects) or CSV for scripts and tests."""

from __future__ import annotations

import argparse
import csv
import io
import json

from exactly_once.cli import common

FORMATS = ("table", "json", "csv")
TABLE_ROWS = 20  # what `--format table` shows without --limit


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "show", handle, help="a table's rows: the pipeline's, "
                            "by one-, two- or three-part name, or the local catalog's")
    parser.add_argument("table")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (the first rows), json (an array of row objects) or csv "
                        "(with a header)")
    parser.add_argument("--limit", type=common.positive, default=None, metavar="N",
                        help=f"at most N rows (default: {TABLE_ROWS} as a table, every row as "
                        "json or csv)")
    common.add_bundle(parser)
    common.add_warehouse(parser, object_store=True)


def handle(args: argparse.Namespace) -> int:
    from exactly_once.local.inspect import preview
    from exactly_once.local.storage.warehouse import Warehouse

    pipeline = common.pipeline_of(args)
    warehouse = Warehouse(common.warehouse_of(args))
    name, where = preview.located(warehouse, pipeline.scope, args.table)  # before a JVM starts
    spark = common.spark_for(args, warehouse.root)
    try:
        df, version = preview.rows(spark, where)
        if args.format == "table":
            limit = args.limit or TABLE_ROWS
            count = df.count()
            print(f"{name}: {count:,} rows (Delta version {version}); the first "
                  f"{min(count, limit):,}:")
            df.show(limit, truncate=40)
            return 0
        if args.limit is not None:
            df = df.limit(args.limit)
        print(as_json(df) if args.format == "json" else as_csv(df), end="")
    finally:
        spark.stop()
    return 0


def as_json(df) -> str:
    """An array of row objects, one per line; values as Spark's JSON writes them (decimals as
    numbers, timestamps in ISO 8601), a NULL as null."""
    from pyspark.sql import functions as F

    from exactly_once.local.engine.sql_columns import struct_of
    from exactly_once.local.engine.update_settings import set_for_block

    # The session's own setting back after: the resident engine runs pipelines next.
    with set_for_block(df.sparkSession, {"spark.sql.jsonGenerator.ignoreNullFields": "false"}):
        lines = [r[0] for r in df.select(F.to_json(struct_of(df.columns))).collect()]
    return "[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n"


def as_csv(df) -> str:
    """A header, then a line per row; a NULL is an empty field."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(df.columns)
    for row in df.collect():
        writer.writerow(["" if v is None else _text(v) for v in row])
    return out.getvalue()


def _text(value: object) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)
