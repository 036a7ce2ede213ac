"""A new topic of the contract, added in one step (`exactly-once add-topic`, item 6 of
docs/contract-changes.md): its settings in conf/base.yml, its pipeline files (the parse, silver,
and a gold table of each key's current state, SCD1, as `orders` has them), the bundle's variable of
its watermark delay in databricks.yml; `exactly-once add-topic` then regenerates its published
contract (conf/<kafka topic>.schema.json) and the bundle's configuration as
`make bundle-config` does. Bronze subscribes to every topic of conf/ and the quarantine takes
each topic's records already, so nothing else changes. Needs no Spark.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from exactly_once.deploy import bundle_resource
from exactly_once.deploy.targets import DEPLOY_TARGETS
from exactly_once.errors import SettingsError
from exactly_once.paths import CONF_DIR, PIPELINES_DIR
from exactly_once.settings.contract import contract_fields
from exactly_once.settings.pipeline import load_settings

# What the project's transforms read of every topic: the event's identity (silver's
# redeliveries, gold's tie-break) and its time (sequence, plausibility, watermark).
REQUIRED_FIELDS = ("event_id", "occurred_at")
NAME = re.compile(r"[a-z][a-z0-9_]*")

SETTINGS = """\
  {name}:
    topic: {kafka_topic}
    key: {key}
    # The newest event wins; event_id breaks ties.
    sequence_by: [occurred_at, event_id]
    delete_event_types: []
    watermark_delay: 10 minutes
    max_clock_skew: 5 minutes      # see orders
    schema: >-                     # published as conf/{kafka_topic}.schema.json
{schema}
    rules:
      has_event_id: "event_id IS NOT NULL AND event_id <> ''"
      has_key: "kafka_key IS NOT NULL AND kafka_key <> ''"
      key_matches_{key}: "kafka_key IS NOT NULL AND {key} IS NOT NULL AND kafka_key = {key}"
      has_occurred_at: "occurred_at IS NOT NULL"
"""

PARSED = '''\
"""Parsed {name}: every {name} record of bronze, parsed and checked once, with `errors`
(as parsed_orders.py)."""

from pyspark import pipelines as dp

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.transforms.silver import parse_events

topic = pipeline_settings(spark).topic("{name}")


@dp.table(name="parsed_{name}",
          comment="Every {name} record with its typed fields and `errors` (empty: valid).")
def parsed_{name}():
    return parse_events(spark.readStream.table("bronze_kafka_events"), topic)
'''

SILVER = '''\
"""Silver {name}: events that pass every rule of `topics.{name}.rules`, each redelivery
dropped within the watermark (as silver_orders.py)."""

from pyspark import pipelines as dp

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.transforms.silver import rule_verdicts, silver_events, well_formed_events

topic = pipeline_settings(spark).topic("{name}")


@dp.temporary_view(name="checked_{name}", comment="Well-formed {name} events.")
@dp.expect_all_or_drop(rule_verdicts(topic))
def checked_{name}():
    return well_formed_events(spark.readStream.table("parsed_{name}"), topic)


@dp.table(name="silver_{name}", comment="Valid {name} events; redeliveries dropped.")
def silver_{name}():
    return silver_events(spark.readStream.table("checked_{name}"), topic)
'''

GOLD = '''\
"""Gold {name}: the current state of each {key} (SCD1), the newest event winning (as
gold_orders.py)."""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.table_properties import TOMBSTONES_KEPT
from exactly_once.transforms.silver import SILVER_ONLY

topic = pipeline_settings(spark).topic("{name}")
deletes = topic.delete_event_types  # none unless conf/ names some

dp.create_streaming_table(name="{name}", comment="Current state of each {key}.",
                          table_properties=TOMBSTONES_KEPT)

dp.create_auto_cdc_flow(
    target="{name}",
    source="silver_{name}",
    keys=[topic.key],
    sequence_by=F.struct(*topic.sequence_by),
    apply_as_deletes=F.col("event_type").isin(*deletes) if deletes else None,
    except_column_list=SILVER_ONLY,
    stored_as_scd_type=1,
)
'''


def pipeline_texts(name: str, key: str) -> dict[str, str]:
    """The topic's pipeline files: file name -> text."""
    return {f"parsed_{name}.py": PARSED.format(name=name),
            f"silver_{name}.py": SILVER.format(name=name),
            f"gold_{name}.py": GOLD.format(name=name, key=key)}


def with_topic(base_yml: str, block: str) -> str:
    """conf/base.yml's text with `block` appended to `topics:`, comments kept: before the next
    top-level key (and the comment lines just above it)."""
    lines = base_yml.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == "topics:"), None)
    if start is None:
        raise SettingsError("conf/base.yml has no top-level `topics:`")
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and not lines[i][0].isspace() and lines[i][0] != "#"),
               len(lines))
    while end > start + 1 and (lines[end - 1].startswith("#") or not lines[end - 1].strip()):
        end -= 1
    return "".join([*lines[:end], "\n", block, *lines[end:]])


def check(name: str, kafka_topic: str, key: str, schema: str, conf_dir: Path,
          pipelines_dir: Path) -> None:
    """A SettingsError naming what makes the topic one the project cannot add."""
    if not NAME.fullmatch(name):
        raise SettingsError(f"topic name `{name}`: lower case letters, digits and `_`, "
                            "starting with a letter (it names the datasets: parsed_<name>)")
    settings = load_settings("local", conf_dir)
    if name in settings.topics:
        raise SettingsError(f"conf/ has topic `{name}` already")
    if kafka_topic in {t.kafka_topic for t in settings.topics.values()}:
        raise SettingsError(f"Kafka topic `{kafka_topic}` is read by a topic of conf/ already")
    fields = [f.name for f in contract_fields(schema, f"topics.{name}.schema")]
    missing = [f for f in (*REQUIRED_FIELDS, key) if f not in fields]
    if missing:
        raise SettingsError(f"topics.{name}.schema lacks {', '.join(missing)}: every topic's "
                            f"events carry {', '.join(REQUIRED_FIELDS)} and their key")
    there = [f for f in pipeline_texts(name, key) if (pipelines_dir / f).exists()]
    if there:
        raise SettingsError(f"pipelines/ has {', '.join(there)} already")


def add_topic(name: str, kafka_topic: str, key: str, schema: str, conf_dir: Path = CONF_DIR,
              pipelines_dir: Path = PIPELINES_DIR) -> list[Path]:
    """Add the topic's settings and pipeline files; the files written. Nothing is written
    when the topic cannot be added, and conf/ is restored when the settings do not load."""
    check(name, kafka_topic, key, schema, conf_dir, pipelines_dir)
    base = conf_dir / "base.yml"
    before = base.read_text(encoding="utf-8")
    wrapped = textwrap.fill(" ".join(schema.split()), width=94, initial_indent=" " * 6,
                            subsequent_indent=" " * 6, break_long_words=False)
    block = SETTINGS.format(name=name, kafka_topic=kafka_topic, key=key, schema=wrapped)
    base.write_text(with_topic(before, block), encoding="utf-8")
    try:
        load_settings("local", conf_dir).topic(name)
    except Exception:
        base.write_text(before, encoding="utf-8")
        raise
    written = [base]
    for file_name, text in pipeline_texts(name, key).items():
        (pipelines_dir / file_name).write_text(text, encoding="utf-8")
        written.append(pipelines_dir / file_name)
    bundle = bundle_resource.BUNDLE_FILE
    variable = f"{name}_watermark_delay"  # bundle_resource.bundle_variables: varies by target
    values = {target: bundle_resource.target_variables(target, conf_dir)[variable]
              for target in DEPLOY_TARGETS}
    bundle.write_text(with_variable(bundle.read_text(encoding="utf-8"), variable,
                                    f"How long redeliveries of a {name} event are caught by "
                                    "streaming state", values), encoding="utf-8")
    return [*written, bundle]


def with_variable(bundle_yml: str, variable: str, description: str,
                  values: dict[str, str]) -> str:
    """databricks.yml's text with `variable` declared after the last topic's and set in each
    target after the last topic's (`<topic>_watermark_delay`), comments kept."""
    lines = bundle_yml.splitlines(keepends=True)
    declared = [i for i, line in enumerate(lines) if re.match(r"  \w+_watermark_delay:", line)]
    if not declared:
        raise SettingsError("databricks.yml declares no `<topic>_watermark_delay` variable")
    target, last_set = None, {}
    for i, line in enumerate(lines):
        if found := re.fullmatch(r"  (\w+):\s*", line):
            target = found[1]
        elif target and re.match(r"      \w+_watermark_delay:", line):
            last_set[target] = i
    insertions = {declared[-1] + 2: f"  {variable}:\n    description: {description}\n"}
    for name, value in values.items():
        if name not in last_set:
            raise SettingsError(f"databricks.yml: target {name} sets no "
                                "`<topic>_watermark_delay` variable")
        insertions[last_set[name] + 1] = f"      {variable}: {value}\n"
    for at in sorted(insertions, reverse=True):
        lines.insert(at, insertions[at])
    return "".join(lines)
