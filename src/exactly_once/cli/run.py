"""`exactly-once run`: one triggered update of the pipeline into the local warehouse, or with
`--continuous` updates every trigger interval until SIGINT / SIGTERM
(local/execution/continuous.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactly_once.cli import common
from exactly_once.errors import SettingsError
from exactly_once.paths import PROFILES_DIR


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = common.command(subparsers, "run", handle, help="run the pipeline once (triggered)")
    common.add_bundle(parser, key="positional")
    common.add_pipelines(parser)
    parser.add_argument("--source", type=common.source, help="`kafka` (default) or `file:PATH`: "
                        "a kcat dump, a directory of dumps or a glob; new dumps are read by the "
                        "next run")
    common.add_warehouse(parser, object_store=True)
    parser.add_argument("--master", help="the Spark master: local[N] or spark://HOST:PORT of a "
                        "standalone cluster (default: engine.master in conf/, local[2])")
    # As `databricks bundle run`: names separated by spaces or commas.
    parser.add_argument("--refresh", type=common.names, nargs="+", default=[], action="extend",
                        metavar="TABLE", help="update only these tables")
    parser.add_argument("--full-refresh", type=common.names, nargs="+", default=[],
                        action="extend", metavar="TABLE", help="reset these tables (data, "
                        "checkpoints, AUTO CDC state), then recompute them")
    parser.add_argument("--full-refresh-all", action="store_true",
                        help="reset and recompute every table that allows it "
                        "(pipelines.reset.allowed)")
    common.add_bootstrap_servers(parser)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a setting of conf/ for this update only, "
                        "e.g. kafka.fail_on_data_loss=false")
    common.add_configuration(parser)
    parser.add_argument("--quiet", action="store_true", help="no per-batch progress")
    parser.add_argument("--profile", action="store_true", help="count each phase's Spark jobs, "
                        "print the top costs and write a trace (Chrome / Perfetto JSON)")
    parser.add_argument("--profile-output", type=Path, metavar="FILE",
                        help=f"where --profile writes the trace (default: {PROFILES_DIR}/"
                        "update-<id>.json)")
    parser.add_argument("--continuous", action="store_true", help="run updates until SIGINT or "
                        "SIGTERM, one every trigger interval; a stop lets the current update "
                        "finish, then exits 0")
    parser.add_argument("--trigger-interval", type=_interval, default=None, metavar="INTERVAL",
                        help="with --continuous: how often an update starts, e.g. 10s, 500ms, "
                        "1 minute (default: 10s)")


def _interval(text: str) -> float:
    from exactly_once.local.execution.continuous import parse_interval

    try:
        return parse_interval(text)
    except SettingsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def handle(args: argparse.Namespace) -> int:
    if args.full_refresh_all and (args.refresh or args.full_refresh):
        args.parser.error("--full-refresh-all cannot be combined with --refresh or "
                          "--full-refresh")
    if args.trigger_interval is not None and not args.continuous:
        args.parser.error("--trigger-interval needs --continuous")
    if args.continuous and args.profile:
        args.parser.error("--profile profiles one update; it cannot be combined with "
                          "--continuous")
    pipeline, warehouse = common.update_inputs(args)

    from exactly_once.local.engine.jvm_processes import ProcessRecording, summary
    from exactly_once.local.engine.update_settings import compiled_classes
    from exactly_once.local.execution.pipeline import run_pipeline
    from exactly_once.local.observe.progress import Progress
    from exactly_once.local.observe.timeline import Timeline

    progress = Progress(quiet=args.quiet)
    if args.continuous:
        return _continuous(args, pipeline, warehouse, progress)
    timeline = Timeline(spark_jobs=args.profile)
    spark = common.spark_for(args, warehouse)
    processes = ProcessRecording(spark).start() if args.profile else None
    classes = compiled_classes(spark) if args.profile else 0
    try:
        result = run_pipeline(spark, pipeline.settings, warehouse,
                              full_refresh=args.full_refresh_all or common.flat(args.full_refresh),
                              refresh=common.flat(args.refresh), progress=progress,
                              timeline=timeline, **common.run_arguments(args, pipeline))
    finally:
        started = processes.stop() if processes else []
        classes = compiled_classes(spark) - classes if args.profile else 0
        spark.stop()
    print(progress.summary(result, bronze="bronze_kafka_events", quarantine="quarantine",
                           late="late_events"))
    if args.profile:
        trace = timeline.write_chrome_trace(
            args.profile_output or PROFILES_DIR / f"update-{result.update_id}.json")
        print(Progress.top_costs(timeline))
        print(f"Trace (open in https://ui.perfetto.dev or chrome://tracing): {trace}")
        print(f"Child processes the Spark JVM started during the update: {summary(started)}")
        print(f"Expression classes compiled during the update: {classes}")
    print(f"Delta tables in {warehouse.resolve()}")
    return 0


def _continuous(args: argparse.Namespace, pipeline, warehouse, progress) -> int:
    from exactly_once.local.execution import continuous

    interval = args.trigger_interval or continuous.parse_interval(
        continuous.DEFAULT_TRIGGER_INTERVAL)
    # Signals are handled from before the JVM starts: a stop during start-up ends the run
    # before its first update.
    with continuous.StopRequest() as stop:
        spark = common.spark_for(args, warehouse)
        stop.install()  # over the SIGINT handler the SparkContext just installed
        try:
            result = continuous.run_continuous(
                spark, pipeline.settings, warehouse, interval, stop,
                full_refresh=args.full_refresh_all or common.flat(args.full_refresh),
                refresh=common.flat(args.refresh), progress=progress,
                after_update=lambda update: print(continuous.update_line(update), flush=True),
                **common.run_arguments(args, pipeline))
        finally:
            spark.stop()
    print(result.summary(bronze="bronze_kafka_events", quarantine="quarantine"))
    return 0
