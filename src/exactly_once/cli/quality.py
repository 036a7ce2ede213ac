"""`exactly-once quality validate|dashboard`: Great Expectations with Data Docs, and the static
HTML dashboard."""

from __future__ import annotations

import argparse
from pathlib import Path

from exactly_once.cli import common
from exactly_once.errors import CliError
from exactly_once.paths import DEFAULT_WAREHOUSE, SPARK_LOG


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from exactly_once.quality.paths import DEFAULT_DASHBOARD, DEFAULT_DATA_DOCS

    parser = subparsers.add_parser("quality", help="data quality: GX validation, dashboard")
    commands = parser.add_subparsers(dest="quality_command", required=True)
    validate = common.command(commands, "validate", handle_validate, help="validate silver and "
                              "gold tables with Great Expectations and build Data Docs; exit 2 "
                              "when a suite fails")
    common.add_warehouse(validate, help="local warehouse (default for target "
                         f"local: {DEFAULT_WAREHOUSE})")
    validate.add_argument("--schema", help="catalog.schema of the tables (non-local targets)")
    validate.add_argument("--data-docs", type=Path, default=DEFAULT_DATA_DOCS)
    dash = common.command(commands, "dashboard", handle_dashboard,
                          help="build the static HTML expectation dashboard")
    common.add_warehouse(dash)
    dash.add_argument("--output", type=Path, default=DEFAULT_DASHBOARD)
    dash.add_argument("--data-docs", type=Path, default=DEFAULT_DATA_DOCS,
                      help="Data Docs to link to, when built")
    dash.add_argument("--serve", action="store_true", help="serve it on 127.0.0.1 until "
                      "stopped, rebuilt when the pipeline commits an update (e.g. while "
                      "`run --continuous` runs); the page reloads itself, and its search "
                      "box explains a key")
    dash.add_argument("--port", type=common.positive, default=8050,
                      help="with --serve (default 8050)")
    dash.add_argument("--refresh-every", type=common.positive, default=10, metavar="SECONDS",
                      help="with --serve: how often the page reloads (default 10)")
    for p in (validate, dash):  # the Databricks job passes --target after the subcommand
        p.add_argument("--target", default=argparse.SUPPRESS, help="settings target")


def _session(args: argparse.Namespace):
    """The local session (with Delta) for the local warehouse, else the platform's session."""
    if args.warehouse is not None or common.conf_target(args) == "local":
        from exactly_once.local.engine import session

        return session.build_session(args.warehouse or DEFAULT_WAREHOUSE, log_level="OFF",
                                     jvm_log=SPARK_LOG)
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def handle_validate(args: argparse.Namespace) -> int:
    from exactly_once.quality.validate import catalog_reader, validate, warehouse_reader
    from exactly_once.settings.quality import load_quality

    settings = common.settings_of(args)
    quality = load_quality(common.conf_target(args))
    local = common.conf_target(args) == "local"
    warehouse = args.warehouse or (DEFAULT_WAREHOUSE if local else None)
    if warehouse is not None and not warehouse.is_dir():
        raise CliError(f"no warehouse at {warehouse}; run `exactly-once run` first")
    spark = _session(args)
    try:
        read = warehouse_reader(spark, warehouse) if warehouse is not None \
            else catalog_reader(spark, args.schema)
        report = validate(spark, read, quality, settings, data_docs=args.data_docs)
    finally:
        if warehouse is not None:
            spark.stop()
    print(report.summary())
    return 0 if report.success else 2


def handle_dashboard(args: argparse.Namespace) -> int:
    from exactly_once.quality.dashboard import build_dashboard

    warehouse = args.warehouse or DEFAULT_WAREHOUSE
    if not warehouse.is_dir():
        raise CliError(f"no warehouse at {warehouse}; run `exactly-once run` first")
    spark = _session(args)
    try:
        if args.serve:
            return _serve(args, spark, warehouse)
        data = build_dashboard(spark, warehouse, args.output, data_docs=args.data_docs)
    finally:
        spark.stop()
    print(f"dashboard of {len(data.updates)} update(s) written to {args.output.resolve()}")
    return 0


def _serve(args: argparse.Namespace, spark, warehouse: Path) -> int:
    import threading

    from exactly_once.local.execution.continuous import StopRequest
    from exactly_once.local.inspect.explain import explainable
    from exactly_once.local.storage.warehouse import Warehouse
    from exactly_once.quality.dashboard import build_dashboard
    from exactly_once.quality.explain_page import explain_page
    from exactly_once.quality.serve import HOST, LivePage, dashboard_server

    settings = common.settings_of(args)
    page = LivePage(args.output, Warehouse(warehouse).event_log_path(), lambda: build_dashboard(
        spark, warehouse, args.output, data_docs=args.data_docs,
        refresh_seconds=args.refresh_every, search=list(explainable(settings))))
    page.build()  # before the first request: no event log yet is a one-line error
    try:
        server = dashboard_server(page, args.port, explain=lambda search: explain_page(
            spark, warehouse, settings, search))
    except OSError as err:
        raise CliError(f"cannot serve on {HOST}:{args.port}: {err.strerror}") from None
    print(f"dashboard at http://{HOST}:{server.server_port}/ (reloads every "
          f"{args.refresh_every}s; Ctrl-C to stop)", flush=True)
    with StopRequest(stopping="stopping the server") as stop:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        stop.event.wait()
        server.shutdown()
    server.server_close()
    return 0
