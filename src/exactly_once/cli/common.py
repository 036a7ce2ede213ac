"""What several commands share: argument types, the settings a command runs with, the broker."""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from exactly_once.errors import CliError, SettingsError
from exactly_once.kafka.kcat import kcat_dump_files
from exactly_once.paths import DEFAULT_WAREHOUSE, PIPELINES_DIR, SPARK_LOG, pipeline_files
from exactly_once.settings import configuration
from exactly_once.settings.engine import EngineSettings, load_engine
from exactly_once.settings.pipeline import (
    FILE_SOURCE,
    Settings,
    check_source,
    load_settings,
    setting_overrides,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from exactly_once.local.graph.dry_run import Analysis
    from exactly_once.local.storage.files import StoragePath

# Partitions per topic when the CLI creates them: more than one, so ordering across partitions
# is exercised as in production.
TOPIC_PARTITIONS = 2

Handler = Callable[[argparse.Namespace], int]


def command(subparsers: argparse._SubParsersAction, name: str, handler: Handler,
            help: str) -> argparse.ArgumentParser:
    """Register subcommand `name`, run by `handler`. The parser rides along on the parsed
    arguments, so a handler can report a bad combination of arguments as argparse does
    (`args.parser.error(...)`, exit 2)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help, description=help)
    parser.set_defaults(handler=handler, parser=parser)
    return parser


# -- settings and the broker -------------------------------------------------------------------
def settings_of(args: argparse.Namespace) -> Settings:
    """conf/ for `--target`, with this command's `--set`, `--bootstrap-servers`, `--source`,
    and its `--conf` over conf/'s pipeline configuration."""
    overrides = setting_overrides(getattr(args, "overrides", []), args.target)
    if getattr(args, "bootstrap_servers", None):
        overrides["exactly_once.kafka.bootstrap_servers"] = args.bootstrap_servers
    if getattr(args, "source", None):
        overrides["exactly_once.source"] = args.source
    settings = load_settings(args.target, overrides=overrides)
    if not getattr(args, "conf", None):
        return settings
    return dataclasses.replace(settings, configuration={
        **settings.configuration, **configuration.assignments(args.conf)})


def engine_of(args: argparse.Namespace) -> EngineSettings:
    """`engine:` of conf/ for `--target`, with this command's `--master`."""
    return load_engine(args.target, master=getattr(args, "master", None))


def warehouse_of(args: argparse.Namespace) -> StoragePath:
    """`--warehouse` as the runtime reads it: a local directory, or `s3a://bucket/prefix`
    reached with the target's `engine.object_store` settings."""
    from exactly_once.local.storage import files

    files.use_object_store(engine_of(args).object_store)
    return files.location(args.warehouse)


def spark_for(args: argparse.Namespace, warehouse: StoragePath) -> SparkSession:
    """The command's Spark session over `warehouse`, on the target's (or `--master`'s) master:
    a `spark://` master that does not answer is one line before a JVM starts."""
    from exactly_once.local.engine import session
    from exactly_once.local.engine.deployment import deployment, require_master

    engine = engine_of(args)
    require_master(engine.master)
    return session.build_session(str(warehouse.resolve()), log_level="OFF", jvm_log=SPARK_LOG,
                                 deployment=deployment(engine, warehouse))


def require_broker(bootstrap: str) -> None:
    from exactly_once.kafka import admin

    admin.require_reachable(bootstrap)


def update_inputs(args: argparse.Namespace) -> tuple[Settings, StoragePath]:
    """What an update (`run`, `rederive`) runs with: the settings with `--source` resolved, and
    the warehouse; a bad `--master`, or a broker that does not answer, is one line before
    anything starts."""
    settings = settings_of(args)
    settings = dataclasses.replace(settings, source=resolve_source(settings.source))
    warehouse = warehouse_of(args)
    engine_of(args)
    if settings.source == "kafka":
        require_broker(settings.kafka.bootstrap_servers)
    return settings, warehouse


def ensure_topics(settings: Settings) -> None:
    from exactly_once.kafka import admin

    admin.ensure_topics(settings.kafka.bootstrap_servers,
                         {t.kafka_topic: TOPIC_PARTITIONS for t in settings.topics.values()})


def analyze_pipelines(args: argparse.Namespace) -> Analysis:
    """The pipeline files of `--pipelines` loaded and analyzed (dry_run.py) in a session of
    their own, with no warehouse: nothing is read or written."""
    from exactly_once.local.engine import session
    from exactly_once.local.graph.dry_run import analyze
    from exactly_once.local.storage.warehouse import Warehouse

    settings = settings_of(args)
    settings = dataclasses.replace(settings, source=resolve_source(settings.source))
    files = pipeline_files(args.pipelines) if args.pipelines.is_dir() else []
    if not files:
        raise CliError(f"no pipeline files (*.py, *.sql) in {args.pipelines}")
    # The warehouse the next update writes: its snapshot versions are what it asks for.
    warehouse = Warehouse(args.warehouse) if getattr(args, "warehouse", None) else None
    with tempfile.TemporaryDirectory(prefix="exactly-once-") as scratch:
        spark = session.build_session(Path(scratch), log_level="OFF", jvm_log=SPARK_LOG)
        try:
            return analyze(spark, settings, files, warehouse)
        finally:
            spark.stop()


def print_problems(analysis: Analysis) -> int:
    """One error line per problem on stderr; the exit code."""
    for problem in analysis.problems:
        print(f"exactly-once: error: {problem.line()}", file=sys.stderr)
    return 1 if analysis.problems else 0


# -- shared arguments ----------------------------------------------------------------------------
def add_warehouse(parser: argparse.ArgumentParser, default: Path | None = DEFAULT_WAREHOUSE,
                  help: str | None = None, object_store: bool = False) -> None:
    """`--warehouse`; with `object_store`, also `s3a://bucket/prefix` (read it with
    `warehouse_of`)."""
    parser.add_argument("--warehouse", type=str if object_store else Path, default=default,
                        help=help or (f"the warehouse: a directory, or s3a://BUCKET/PREFIX on an "
                                      f"object store (default: {DEFAULT_WAREHOUSE})"
                                      if object_store else
                                      f"the local warehouse (default: {DEFAULT_WAREHOUSE})"))


def add_pipelines(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pipelines", type=Path, default=PIPELINES_DIR, metavar="DIR",
                        help="the pipeline files (default: pipelines/)")


def add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a setting of conf/ for this command only, "
                        "e.g. kafka.fail_on_data_loss=false")


def add_configuration(parser: argparse.ArgumentParser) -> None:
    """`--conf KEY=VALUE`, repeatable: a pipeline parameter for this command only, over conf/'s
    `configuration:` (settings/configuration.py)."""
    parser.add_argument("--conf", action="append", default=[], type=_configuration_pair,
                        metavar="KEY=VALUE", help="a pipeline parameter (spark.conf.get(KEY) in "
                        "pipeline code) for this command only, over conf/'s `configuration:`; "
                        "repeatable")


def _configuration_pair(text: str) -> str:
    try:
        configuration.split(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_bootstrap_servers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-servers", help="Kafka brokers (default: from conf/)")


# -- argument types: a bad value exits 2 with argparse's usage line ------------------------------
def rate(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a rate is between 0 and 1, got {text}")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def timestamp(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 timestamp: {text}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def names(text: str) -> list[str]:
    """`a,b` -> [a, b]: a list as `spark-pipelines` and `databricks bundle run` spell it."""
    found = [name.strip() for name in text.split(",") if name.strip()]
    if not found:
        raise argparse.ArgumentTypeError("a table name is needed")
    return found


def flat(groups: list[list[str]]) -> list[str]:
    """`--refresh a,b c` -> [[a, b], [c]] -> [a, b, c]."""
    return [name for group in groups for name in group]


def source(text: str) -> str:
    """The form of `--source`, checked as the settings check it."""
    try:
        return check_source(text)
    except SettingsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def resolve_source(source: str) -> str:
    """The source as a local update reads it, checked now: a `file:` path is made absolute and
    must name at least one kcat dump, as Spark would read a path that names none as an empty
    stream without a word. Pipeline code (`Settings.from_conf`) checks only the form: the dumps
    may arrive after the settings are made."""
    if not check_source(source).startswith(FILE_SOURCE):
        return source
    path = os.path.abspath(source.removeprefix(FILE_SOURCE))
    if not glob.has_magic(path) and not os.path.exists(path):
        raise SettingsError(f"no such file or directory: {path}")
    if not kcat_dump_files(path):
        raise SettingsError(f"no kcat dump matches {path}")
    return FILE_SOURCE + path
