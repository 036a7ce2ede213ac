"""`exactly-once rederive [TABLE ...]`: tables rebuilt from bronze in one update, protected ones
included, so they are what the pipeline's current definition makes of the log
(local/execution/rederive.py): after a field the contract now names that records already
carried, a rule fixed, or a change `run` refuses."""

from __future__ import annotations

import argparse

from exactly_once.cli import common


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "rederive", handle, help="rebuild tables from bronze "
                            "(each named one and every table that reads it; none named: every "
                            "table derived from bronze), protected ones included")
    parser.add_argument("tables", type=common.names, nargs="*", default=[], metavar="TABLE",
                        help="tables to re-derive, with what reads them (commas or spaces)")
    common.add_bundle(parser)
    common.add_pipelines(parser)
    parser.add_argument("--source", type=common.source, help="as for `run`")
    common.add_warehouse(parser, object_store=True)
    parser.add_argument("--master", help="as for `run`")
    common.add_bootstrap_servers(parser)
    common.add_overrides(parser)
    common.add_configuration(parser)
    parser.add_argument("--quiet", action="store_true", help="no per-batch progress")


def handle(args: argparse.Namespace) -> int:
    pipeline, warehouse = common.update_inputs(args)

    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.local.observe.progress import Progress

    progress = Progress(quiet=args.quiet)
    spark = common.spark_for(args, warehouse)
    try:
        result = run_pipeline(spark, pipeline.settings, warehouse, progress=progress,
                              rederive=common.flat(args.tables),
                              **common.run_arguments(args, pipeline))
    finally:
        spark.stop()
    print(progress.summary(result, bronze="bronze_kafka_events", quarantine="quarantine",
                           late="late_events"))
    print(f"Re-derived from bronze: {', '.join(result.reset)}")
    print(f"Delta tables in {warehouse.resolve()}")
    return 0
