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
from typing import TYPE_CHECKING, Any

from exactly_once.errors import CliError, SettingsError
from exactly_once.kafka.kcat import kcat_dump_files
from exactly_once.paths import SPARK_LOG, pipeline_files
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

    from exactly_once.bundle import Bundle
    from exactly_once.local.graph.dry_run import Analysis
    from exactly_once.local.storage.files import StoragePath
    from exactly_once.workspace.pipelines import LocalPipeline

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


# -- the bundle, its pipeline and their settings ------------------------------------------------
def conf_target(args: argparse.Namespace) -> str:
    """conf/'s target: the one named (`--target`), else `local`."""
    return getattr(args, "target", None) or "local"


def bundle_of(args: argparse.Namespace) -> Bundle:
    """The bundle of `--bundle` (default: the current folder or the nearest above it with a
    databricks.yml) for `--target` (default: its default target), with `--var` values."""
    from exactly_once.workspace.pipelines import open_bundle

    if "_bundle" not in vars(args):  # read once per command
        args._bundle = open_bundle(
            getattr(args, "bundle", None), getattr(args, "target", None),
            dict(_variable(v) for v in getattr(args, "variables", None) or []))
    return args._bundle


def _variable(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise CliError(f"--var {text!r}: expected NAME=VALUE")
    return name.strip(), value


def conf_dir_of(args: argparse.Namespace) -> Path | None:
    """The bundle's conf/ (this project's settings), or None when it carries none."""
    from exactly_once.workspace.pipelines import conf_dir

    return conf_dir(bundle_of(args).root)


def pipeline_of(args: argparse.Namespace, key: str | None = None) -> LocalPipeline:
    """The bundle's pipeline this command runs (`KEY` or `--pipeline`; none: the only one),
    with conf/'s settings where the bundle has conf/, `--pipelines DIR` files instead of its
    libraries, and `--warehouse` when given."""
    from exactly_once.workspace.pipelines import conf_dir, local_pipeline

    bundle = bundle_of(args)
    folder = conf_dir(bundle.root)
    if folder is None:
        _without_conf(args)
    settings = settings_of(args, folder) if folder is not None else None
    pipelines = getattr(args, "pipelines", None)
    files = None
    if pipelines is not None:
        files = tuple(pipeline_files(pipelines)) if pipelines.is_dir() else ()
        if not files:
            raise CliError(f"no pipeline files (*.py, *.sql) in {pipelines}")
    warehouse = getattr(args, "warehouse", None)
    return local_pipeline(bundle, key or getattr(args, "pipeline", None), settings=settings,
                          warehouse=None if warehouse is None else warehouse_of(args),
                          files=files)


def _without_conf(args: argparse.Namespace) -> None:
    """A bundle without conf/ has none of this project's settings to set or override."""
    for flag, given in (("--set", getattr(args, "overrides", None)),
                        ("--source", getattr(args, "source", None)),
                        ("--bootstrap-servers", getattr(args, "bootstrap_servers", None))):
        if given:
            raise CliError(f"{flag}: this bundle has no conf/ (the exactly-once project's "
                           f"Kafka and topic settings) to apply it to")


def configuration_of(args: argparse.Namespace, pipeline: LocalPipeline) -> dict[str, str]:
    """The pipeline's configuration for this command: its resource's, with `--conf` over it."""
    return {**pipeline.configuration, **configuration.assignments(getattr(args, "conf", []))}


def not_local(pipeline: LocalPipeline) -> list[str]:
    """What the bundle says that has no meaning on this machine, a line per setting: shown by
    `dry-run`, never silently dropped."""
    def shown(value: object) -> str:
        text = value if isinstance(value, str) else repr(value)
        return text if len(text) <= 60 else text[:57] + "..."

    lines = [f"  pipeline {pipeline.key}: {key}: {shown(value)}"
             for key, value in pipeline.no_local_meaning.items()]
    lines += [f"  bundle: {key}: {shown(value)}"
              for key, value in pipeline.bundle.ignored.items()]
    if not lines:
        return []
    return ["not applied locally (a workspace's settings: compute, permissions, deployment):",
            *lines]


def run_arguments(args: argparse.Namespace, pipeline: LocalPipeline) -> dict[str, Any]:
    """What run_pipeline takes of the bundle's pipeline for this command."""
    return {**pipeline.run_arguments(), "configuration": configuration_of(args, pipeline)}


def settings_of(args: argparse.Namespace, conf_dir: Path | None = None) -> Settings:
    """conf/ for `--target`, with this command's `--set`, `--bootstrap-servers`, `--source`,
    and its `--conf` over conf/'s pipeline configuration."""
    from exactly_once.paths import CONF_DIR

    conf_dir = conf_dir or CONF_DIR
    target = conf_target(args)
    overrides = setting_overrides(getattr(args, "overrides", []), target, conf_dir)
    if getattr(args, "bootstrap_servers", None):
        overrides["exactly_once.kafka.bootstrap_servers"] = args.bootstrap_servers
    if getattr(args, "source", None):
        overrides["exactly_once.source"] = args.source
    settings = load_settings(target, conf_dir=conf_dir, overrides=overrides)
    if not getattr(args, "conf", None):
        return settings
    return dataclasses.replace(settings, configuration={
        **settings.configuration, **configuration.assignments(args.conf)})


def engine_of(args: argparse.Namespace) -> EngineSettings:
    """`engine:` of conf/ for `--target`, with this command's `--master`; a bundle without
    conf/ runs on the defaults (local[2])."""
    master = getattr(args, "master", None)
    folder = conf_dir_of(args)
    if folder is None:
        return dataclasses.replace(EngineSettings(), **({"master": master} if master else {}))
    return load_engine(conf_target(args), folder, master=master)


def warehouse_of(args: argparse.Namespace) -> StoragePath:
    """`--warehouse` as the runtime reads it: a local directory, or `s3a://bucket/prefix`
    reached with the target's `engine.object_store` settings; without one, the bundle
    pipeline's own (under the bundle's .local/)."""
    from exactly_once.local.storage import files

    files.use_object_store(engine_of(args).object_store)
    if getattr(args, "warehouse", None) is None:
        return files.location(str(pipeline_of(args).warehouse))
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


def update_inputs(args: argparse.Namespace) -> tuple[LocalPipeline, StoragePath]:
    """What an update (`run`, `rederive`) runs: the bundle's pipeline, its settings with
    `--source` resolved, and the warehouse; a bad `--master`, or a broker that does not answer,
    is one line before anything starts."""
    pipeline = pipeline_of(args)
    if pipeline.settings is not None:
        pipeline = dataclasses.replace(pipeline, settings=dataclasses.replace(
            pipeline.settings, source=resolve_source(pipeline.settings.source)))
    warehouse = warehouse_of(args)
    engine_of(args)
    if pipeline.settings is not None and pipeline.settings.source == "kafka":
        require_broker(pipeline.settings.kafka.bootstrap_servers)
    return pipeline, warehouse


def ensure_topics(settings: Settings) -> None:
    from exactly_once.kafka import admin

    admin.ensure_topics(settings.kafka.bootstrap_servers,
                         {t.kafka_topic: TOPIC_PARTITIONS for t in settings.topics.values()})


def analyze_pipelines(args: argparse.Namespace) -> Analysis:
    """The bundle pipeline's files (or `--pipelines`') loaded and analyzed (dry_run.py) in a
    session of their own, with no warehouse: nothing is read or written."""
    from exactly_once.local.engine import session
    from exactly_once.local.graph.dry_run import analyze
    from exactly_once.local.storage.warehouse import Warehouse

    pipeline = pipeline_of(args)
    settings = pipeline.settings
    if settings is not None:
        settings = dataclasses.replace(settings, source=resolve_source(settings.source))
    # The warehouse the next update writes: its snapshot versions are what it asks for.
    warehouse = Warehouse(warehouse_of(args)) if getattr(args, "warehouse", None) else None
    with tempfile.TemporaryDirectory(prefix="exactly-once-") as scratch:
        spark = session.build_session(Path(scratch), log_level="OFF", jvm_log=SPARK_LOG)
        try:
            return analyze(spark, settings, pipeline.files, warehouse, scope=pipeline.scope,
                           configuration=configuration_of(args, pipeline),
                           root_path=pipeline.root_path)
        finally:
            spark.stop()


def print_problems(analysis: Analysis) -> int:
    """One error line per problem on stderr; the exit code."""
    for problem in analysis.problems:
        print(f"exactly-once: error: {problem.line()}", file=sys.stderr)
    return 1 if analysis.problems else 0


# -- shared arguments ----------------------------------------------------------------------------
def add_warehouse(parser: argparse.ArgumentParser, help: str | None = None,
                  object_store: bool = False) -> None:
    """`--warehouse`; with `object_store`, also `s3a://bucket/prefix` (read it with
    `warehouse_of`). Without it, the bundle pipeline's own warehouse."""
    default = "the pipeline's, under the bundle's .local/"
    parser.add_argument("--warehouse", type=str if object_store else Path, default=None,
                        help=help or (f"the warehouse: a directory, or s3a://BUCKET/PREFIX on an "
                                      f"object store (default: {default})"
                                      if object_store else
                                      f"the local warehouse (default: {default})"))


def add_bundle(parser: argparse.ArgumentParser, key: str = "option") -> None:
    """Which bundle and pipeline: `--bundle DIR`, `--var NAME=VALUE`, `--target` (also before
    the command), and the pipeline's key: a positional `KEY` (`key="positional"`, as
    `databricks pipelines run [KEY]`) or `--pipeline KEY`."""
    if key == "positional":
        parser.add_argument("pipeline", nargs="?", metavar="KEY", help="the bundle's pipeline "
                            "(resources.pipelines.KEY); optional when it has one")
    else:
        parser.add_argument("--pipeline", metavar="KEY", help="the bundle's pipeline "
                            "(resources.pipelines.KEY); optional when it has one")
    bundle_options(parser, argparse.SUPPRESS)


def bundle_options(parser: argparse.ArgumentParser, default: object = None) -> None:
    """`--bundle`, `--target`, `--var`: on the main parser, and on each pipeline command with
    SUPPRESS defaults, so that a value given after the command is kept and one given before
    is not overwritten."""
    parser.add_argument("--bundle", type=Path, metavar="DIR", default=default,
                        help="the bundle's folder (default: the current folder, or the "
                        "nearest one above it with a databricks.yml)")
    parser.add_argument("--target", "-t", default=default,
                        help="the bundle's target (default: its `default: true` one) and "
                        "conf/'s settings target (default: local)")
    parser.add_argument("--var", dest="variables", action="append", metavar="NAME=VALUE",
                        default=default, help="a bundle variable's value, repeatable")


def add_pipelines(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pipelines", type=Path, default=None, metavar="DIR",
                        help="pipeline files to use instead of the bundle pipeline's libraries")


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
