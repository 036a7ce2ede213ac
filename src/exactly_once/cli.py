"""`exactly-once`: the local platform's command line.

    exactly-once broker start|stop|status      a local Apache Kafka broker (KRaft, loopback)
    exactly-once produce FILE                  publish a `kcat -C -J` JSONL file
    exactly-once generate [--events N ...]     publish a synthetic stream with redeliveries
    exactly-once run [--source ...]            one triggered pipeline update into the warehouse
    exactly-once quality validate|dashboard    Great Expectations + Data Docs; the HTML dashboard

Errors print one line and exit non-zero; nothing here is meant to end in a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from exactly_once.config import (
    Settings,
    check_source,
    load_settings,
    resolve_source,
    setting_overrides,
)
from exactly_once.errors import CliError, ExactlyOnceError, SettingsError
from exactly_once.paths import BROKER_DIR, DEFAULT_WAREHOUSE, PROFILES_DIR, SPARK_LOG

# Partitions per topic when the CLI creates them: more than one, so ordering across partitions
# is exercised as in production.
TOPIC_PARTITIONS = 2


def _settings(args: argparse.Namespace) -> Settings:
    overrides = setting_overrides(getattr(args, "overrides", []), args.target)
    if getattr(args, "bootstrap_servers", None):
        overrides["exactly_once.kafka.bootstrap_servers"] = args.bootstrap_servers
    if getattr(args, "source", None):
        overrides["exactly_once.source"] = args.source
    return load_settings(args.target, overrides=overrides)


def _require_broker(bootstrap: str) -> None:
    from exactly_once.kafka import broker

    broker.require_reachable(bootstrap)


def _ensure_topics(settings: Settings) -> None:
    from exactly_once.kafka import broker

    broker.ensure_topics(settings.kafka.bootstrap_servers,
                         {t.kafka_topic: TOPIC_PARTITIONS for t in settings.topics.values()})


# -- commands ---------------------------------------------------------------------------------
def cmd_broker(args: argparse.Namespace) -> int:
    from exactly_once.kafka import broker

    if args.action == "start":
        info = broker.start(port=args.port, home=args.home)
        print(f"Kafka broker running at {info.bootstrap} (pid {info.pid}, log {info.log_file})")
        settings = load_settings(args.target, overrides={
            "exactly_once.kafka.bootstrap_servers": info.bootstrap})
        _ensure_topics(settings)
    elif args.action == "stop":
        print("Kafka broker stopped" if broker.stop(home=args.home) else "no broker was running")
    else:
        running = broker.status(home=args.home)
        if running is None:
            print("no broker running")
            return 3
        print(f"Kafka broker running at {running.bootstrap} (pid {running.pid})")
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    from exactly_once.kafka.kcat import read_kcat_jsonl
    from exactly_once.kafka.producer import produce_records

    if not args.file.is_file():
        raise CliError(f"no such file: {args.file}")
    settings = _settings(args)
    records = read_kcat_jsonl(args.file)
    _require_broker(settings.kafka.bootstrap_servers)
    _ensure_topics(settings)
    sent = produce_records(settings.kafka.bootstrap_servers, records)
    print(f"published {sent:,} records from {args.file}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from exactly_once.kafka.generator import GeneratorConfig, generate_stream
    from exactly_once.kafka.kcat import as_consumed, write_kcat_jsonl
    from exactly_once.kafka.producer import produce_records

    settings = _settings(args)
    config = GeneratorConfig(
        events=args.events, orders=args.orders, players=args.players,
        duplicate_rate=args.duplicate_rate, late_redelivery_rate=args.late_rate,
        out_of_order_rate=args.out_of_order_rate, delete_rate=args.delete_rate,
        malformed_rate=args.malformed_rate, seed=args.seed, start=args.start,
        orders_topic=settings.topic("orders").kafka_topic,
        rewards_topic=settings.topic("player_rewards").kafka_topic,
    )
    records = generate_stream(config)
    if args.output:
        write_kcat_jsonl(args.output, as_consumed(records))
        print(f"wrote {len(records):,} records to {args.output}")
        return 0
    _require_broker(settings.kafka.bootstrap_servers)
    _ensure_topics(settings)
    sent = produce_records(settings.kafka.bootstrap_servers, records)
    print(f"published {sent:,} records ({config.events:,} events plus redeliveries and "
          f"malformed records, seed {config.seed})")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    settings = dataclasses.replace(settings, source=resolve_source(settings.source))
    if settings.source == "kafka":
        _require_broker(settings.kafka.bootstrap_servers)

    from exactly_once.local.pipeline import run_pipeline
    from exactly_once.local.progress import Progress
    from exactly_once.local.session import build_session
    from exactly_once.local.timeline import Timeline

    progress = Progress(quiet=args.quiet)
    timeline = Timeline(spark_jobs=args.profile)
    spark = build_session(args.warehouse, log_level="OFF", jvm_log=SPARK_LOG)
    try:
        result = run_pipeline(spark, settings, args.warehouse,
                              full_refresh=args.full_refresh_all or _flat(args.full_refresh),
                              refresh=_flat(args.refresh), progress=progress, timeline=timeline)
    finally:
        spark.stop()
    print(progress.summary(result, bronze="bronze_kafka_events", quarantine="quarantine",
                           late="late_events"))
    if args.profile:
        trace = timeline.write_chrome_trace(
            args.profile_output or PROFILES_DIR / f"update-{result.update_id}.json")
        print(Progress.top_costs(timeline))
        print(f"Trace (open in https://ui.perfetto.dev or chrome://tracing): {trace}")
    print(f"Delta tables in {args.warehouse.resolve()}")
    return 0


def _quality_session(args: argparse.Namespace):
    """The local session (with Delta) for the local warehouse, else the platform's session."""
    if args.warehouse is not None or args.target == "local":
        from exactly_once.local.session import build_session

        return build_session(args.warehouse or DEFAULT_WAREHOUSE, log_level="OFF",
                             jvm_log=SPARK_LOG)
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()


def cmd_quality_validate(args: argparse.Namespace) -> int:
    from exactly_once.config import load_quality
    from exactly_once.quality.validate import catalog_reader, validate, warehouse_reader

    settings = _settings(args)
    quality = load_quality(args.target)
    warehouse = args.warehouse or (DEFAULT_WAREHOUSE if args.target == "local" else None)
    if warehouse is not None and not warehouse.is_dir():
        raise CliError(f"no warehouse at {warehouse}; run `exactly-once run` first")
    spark = _quality_session(args)
    try:
        read = warehouse_reader(spark, warehouse) if warehouse is not None \
            else catalog_reader(spark, args.schema)
        report = validate(spark, read, quality, settings, data_docs=args.data_docs)
    finally:
        if warehouse is not None:
            spark.stop()
    print(report.summary())
    return 0 if report.success else 2


def cmd_quality_dashboard(args: argparse.Namespace) -> int:
    from exactly_once.quality.dashboard import build_dashboard

    warehouse = args.warehouse or DEFAULT_WAREHOUSE
    if not warehouse.is_dir():
        raise CliError(f"no warehouse at {warehouse}; run `exactly-once run` first")
    spark = _quality_session(args)
    try:
        data = build_dashboard(spark, warehouse, args.output, data_docs=args.data_docs)
    finally:
        spark.stop()
    print(f"dashboard of {len(data.updates)} update(s) written to {args.output.resolve()}")
    return 0


# -- parsing ----------------------------------------------------------------------------------
def _rate(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a rate is between 0 and 1, got {text}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _timestamp(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 timestamp: {text}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _tables(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("a table name is needed")
    return names


def _flat(groups: list[list[str]]) -> list[str]:
    """`--refresh a,b c` -> [[a, b], [c]] -> [a, b, c]."""
    return [name for group in groups for name in group]


def _source(text: str) -> str:
    """The form of `--source`, checked as the settings check it (exit 2 for a bad argument)."""
    try:
        return check_source(text)
    except SettingsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="exactly-once", description=__doc__.split("\n")[0])
    parser.add_argument("--target", default="local", help="settings target in conf/targets")
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="start, stop or check the local Kafka broker")
    broker.add_argument("action", choices=["start", "stop", "status"])
    broker.add_argument("--port", type=_positive, default=9092)
    broker.add_argument("--home", type=Path, default=BROKER_DIR, help="broker data and logs")
    broker.set_defaults(handler=cmd_broker)

    produce = sub.add_parser("produce", help="publish a kcat -C -J JSONL file")
    produce.add_argument("file", type=Path)
    produce.add_argument("--bootstrap-servers")
    produce.set_defaults(handler=cmd_produce)

    gen = sub.add_parser("generate", help="publish a synthetic stream of both topics")
    gen.add_argument("--events", type=_positive, default=5000, help="original events")
    gen.add_argument("--orders", type=_positive, default=500)
    gen.add_argument("--players", type=_positive, default=200)
    gen.add_argument("--duplicate-rate", type=_rate, default=0.2)
    gen.add_argument("--late-rate", type=_rate, default=0.05, help="late redeliveries")
    gen.add_argument("--out-of-order-rate", type=_rate, default=0.1)
    gen.add_argument("--delete-rate", type=_rate, default=0.1)
    gen.add_argument("--malformed-rate", type=_rate, default=0.01)
    gen.add_argument("--seed", type=int, default=None, help="default: from the clock")
    gen.add_argument("--start", type=_timestamp, default=None,
                     help="event time of the first event (default: now)")
    gen.add_argument("--output", type=Path, help="write kcat JSONL here instead of publishing")
    gen.add_argument("--bootstrap-servers")
    gen.set_defaults(handler=cmd_generate)

    run = sub.add_parser("run", help="run the pipeline once (triggered)")
    run.add_argument("--source", type=_source, help="`kafka` (default) or `file:PATH`: a kcat "
                     "dump, a directory of dumps or a glob; new dumps are read by the next run")
    run.add_argument("--warehouse", type=Path, default=DEFAULT_WAREHOUSE)
    # As `databricks bundle run`: names separated by spaces or commas.
    run.add_argument("--refresh", type=_tables, nargs="+", default=[], action="extend",
                     metavar="TABLE", help="update only these tables")
    run.add_argument("--full-refresh", type=_tables, nargs="+", default=[], action="extend",
                     metavar="TABLE", help="reset these tables (data, checkpoints, AUTO CDC "
                     "state), then recompute them")
    run.add_argument("--full-refresh-all", action="store_true",
                     help="reset and recompute every table that allows it "
                     "(pipelines.reset.allowed)")
    run.add_argument("--bootstrap-servers")
    run.add_argument("--set", dest="overrides", action="append", default=[],
                     metavar="KEY=VALUE", help="a setting of conf/ for this update only, e.g. "
                     "kafka.fail_on_data_loss=false")
    run.add_argument("--quiet", action="store_true", help="no per-batch progress")
    run.add_argument("--profile", action="store_true", help="count each phase's Spark jobs, "
                     "print the top costs and write a trace (Chrome / Perfetto JSON)")
    run.add_argument("--profile-output", type=Path, metavar="FILE",
                     help=f"where --profile writes the trace (default: {PROFILES_DIR}/"
                     "update-<id>.json)")
    run.set_defaults(handler=cmd_run)

    from exactly_once.quality.paths import DEFAULT_DASHBOARD, DEFAULT_DATA_DOCS

    quality = sub.add_parser("quality", help="data quality: GX validation, dashboard")
    qsub = quality.add_subparsers(dest="quality_command", required=True)
    validate = qsub.add_parser("validate", help="validate silver and gold tables with Great "
                               "Expectations and build Data Docs; exit 2 when a suite fails")
    validate.add_argument("--warehouse", type=Path, default=None,
                          help=f"local warehouse (default for target local: {DEFAULT_WAREHOUSE})")
    validate.add_argument("--schema", help="catalog.schema of the tables (non-local targets)")
    validate.add_argument("--data-docs", type=Path, default=DEFAULT_DATA_DOCS)
    validate.set_defaults(handler=cmd_quality_validate)
    dash = qsub.add_parser("dashboard", help="build the static HTML expectation dashboard")
    dash.add_argument("--warehouse", type=Path, default=None)
    dash.add_argument("--output", type=Path, default=DEFAULT_DASHBOARD)
    dash.add_argument("--data-docs", type=Path, default=DEFAULT_DATA_DOCS,
                      help="Data Docs to link to, when built")
    dash.set_defaults(handler=cmd_quality_dashboard)
    for p in (validate, dash):  # the Databricks job passes --target after the subcommand
        p.add_argument("--target", default=argparse.SUPPRESS, help="settings target")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "full_refresh_all", False) and (args.refresh or args.full_refresh):
        parser.error("--full-refresh-all cannot be combined with --refresh or --full-refresh")
    if getattr(args, "seed", 0) is None:
        args.seed = time.time_ns() % 2**31
    if getattr(args, "start", 0) is None:
        args.start = datetime.now(timezone.utc)
    try:
        return args.handler(args)
    except ExactlyOnceError as err:
        print(f"exactly-once: error: {one_line(str(err))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def one_line(message: str) -> str:
    """A message on one line: a broker's log tail, say, joined with ` | `."""
    return " | ".join(line.strip() for line in message.splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
