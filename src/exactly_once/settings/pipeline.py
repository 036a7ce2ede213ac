"""Pipeline settings: read once from `conf/`, handed to Spark as flat `exactly_once.*` keys.

Locally, `load_settings(target)` reads conf/base.yml plus conf/targets/<target>.yml. The local
runtime (and, on Databricks, the bundle's pipeline `configuration`) puts `Settings.to_conf()` into
the Spark conf; pipeline code reads it back with `pipeline_settings(spark)`. Both go through
`Settings.from_conf`, so a missing or malformed setting fails the same way everywhere: a
`SettingsError` naming the key. The user's own pipeline parameters (conf/'s `configuration:`)
ride along as `Settings.configuration` (configuration.py), never as `exactly_once.*` keys.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exactly_once.errors import SettingsError
from exactly_once.paths import CONF_DIR
from exactly_once.settings import values
from exactly_once.settings.conf_files import target_document
from exactly_once.settings.configuration import from_document as configuration_from
from exactly_once.settings.exports import ExportSettings
from exactly_once.settings.values import PREFIX

FILE_SOURCE = "file:"  # `file:PATH`: kcat dumps instead of Kafka (local replays, tests)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# read_committed skips the records of aborted transactions (and of open ones, until they end);
# read_uncommitted, Kafka's default, delivers them as if they had happened.
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# The plausibility rule every topic with a `max_clock_skew` gets, after its configured rules.
OCCURRED_AT_IN_FUTURE = "occurred_at_in_future"


def occurred_at_in_future_rule(max_clock_skew: str) -> str:
    """An event may be dated at most `max_clock_skew` after its record's Kafka timestamp.

    The Kafka timestamp comes from the log (producer or broker clock), so one producer with a
    wrong clock, or a wrong unit, cannot date an event into the future and move silver's
    watermark past every later event. TRUE or FALSE, never NULL: a missing occurred_at fails
    `has_occurred_at`, not this rule.
    """
    return (f"occurred_at IS NULL OR kafka_timestamp IS NULL OR "
            f"occurred_at <= kafka_timestamp + INTERVAL {max_clock_skew}")


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    isolation_level: str = "read_committed"
    # How long the source waits for a broker that does not answer (conf/base.yml says how they
    # bound a failed update): one request, one consumer or admin call with its retries, one
    # task's poll for records, and how many times the driver retries its offset look-ups.
    request_timeout_ms: int = 10_000
    default_api_timeout_ms: int = 20_000
    poll_timeout_ms: int = 20_000
    fetch_offset_retries: int = 3
    security_protocol: str = "PLAINTEXT"
    # SASL (used when security_protocol is SASL_*): the mechanism, and where the credentials live.
    # Never the credentials themselves: on Databricks they come from `secret_scope`
    # (keys `sasl_username_key` / `sasl_password_key`), locally from the environment variables
    # EXACTLY_ONCE_KAFKA_SASL_USERNAME / _PASSWORD. See exactly_once.kafka.security.
    sasl_mechanism: str = "PLAIN"
    secret_scope: str = ""
    sasl_username_key: str = "kafka-sasl-username"
    sasl_password_key: str = "kafka-sasl-password"


@dataclass(frozen=True)
class TopicSettings:
    """One Kafka topic of the event contract and how silver/gold treat it."""

    # The topic's name in conf (`topics.<dataset_suffix>`) and in its datasets (`parsed_<...>`,
    # `silver_<...>`) and quarantine rows (`source_topic`), e.g. `player_rewards`.
    dataset_suffix: str
    kafka_topic: str  # the Kafka topic, e.g. `player-rewards` (`topics.<dataset_suffix>.topic`)
    key: str  # entity ID field, also the Kafka key
    sequence_by: tuple[str, ...]
    delete_event_types: tuple[str, ...]
    watermark_delay: str
    schema: str  # Spark DDL of the event's typed fields
    # name -> SQL constraint: the configured rules, then OCCURRED_AT_IN_FUTURE (derived from
    # max_clock_skew by from_conf, never written to the conf itself).
    rules: Mapping[str, str] = field(default_factory=dict)
    # Events older than this when they arrive are not applied to additive effects but kept in
    # `late_events` with the reason; "" applies every event however late.
    max_event_age: str = ""
    # How far after its Kafka timestamp an event may be dated; "" checks nothing.
    max_clock_skew: str = ""


@dataclass(frozen=True)
class Settings:
    source: str
    kafka: KafkaSettings
    topics: Mapping[str, TopicSettings]
    exports: Mapping[str, ExportSettings] = field(default_factory=dict)
    # conf/'s `configuration:`: the pipeline's parameters, which the runtime puts in the session
    # for each update (not in `to_conf`: Spark conf does not say which keys are parameters).
    configuration: Mapping[str, str] = field(default_factory=dict)

    def topic(self, name: str) -> TopicSettings:
        try:
            return self.topics[name]
        except KeyError:
            raise SettingsError(f"{PREFIX}.topics has no topic `{name}`") from None

    def export(self, name: str) -> ExportSettings:
        try:
            return self.exports[name]
        except KeyError:
            raise SettingsError(f"{PREFIX}.exports has no export `{name}`") from None

    def to_conf(self) -> dict[str, str]:
        """Flat string settings, as Spark conf / bundle pipeline configuration carries them."""
        k = self.kafka
        conf = {
            f"{PREFIX}.source": self.source,
            f"{PREFIX}.kafka.bootstrap_servers": k.bootstrap_servers,
            f"{PREFIX}.kafka.starting_offsets": k.starting_offsets,
            f"{PREFIX}.kafka.max_offsets_per_trigger": str(k.max_offsets_per_trigger or ""),
            f"{PREFIX}.kafka.fail_on_data_loss": str(k.fail_on_data_loss).lower(),
            f"{PREFIX}.kafka.isolation_level": k.isolation_level,
            f"{PREFIX}.kafka.request_timeout_ms": str(k.request_timeout_ms),
            f"{PREFIX}.kafka.default_api_timeout_ms": str(k.default_api_timeout_ms),
            f"{PREFIX}.kafka.poll_timeout_ms": str(k.poll_timeout_ms),
            f"{PREFIX}.kafka.fetch_offset_retries": str(k.fetch_offset_retries),
            f"{PREFIX}.kafka.security_protocol": k.security_protocol,
            f"{PREFIX}.kafka.sasl_mechanism": k.sasl_mechanism,
            f"{PREFIX}.kafka.secret_scope": k.secret_scope,
            f"{PREFIX}.kafka.sasl_username_key": k.sasl_username_key,
            f"{PREFIX}.kafka.sasl_password_key": k.sasl_password_key,
            f"{PREFIX}.topics": ",".join(self.topics),
        }
        for name, t in self.topics.items():
            p = f"{PREFIX}.topics.{name}"
            conf |= {
                f"{p}.topic": t.kafka_topic,
                f"{p}.key": t.key,
                f"{p}.sequence_by": ",".join(t.sequence_by),
                f"{p}.delete_event_types": ",".join(t.delete_event_types),
                f"{p}.watermark_delay": t.watermark_delay,
                f"{p}.schema": t.schema,
                f"{p}.rules": json.dumps({name: sql for name, sql in t.rules.items()
                                          if name != OCCURRED_AT_IN_FUTURE}),
                f"{p}.max_event_age": t.max_event_age,
                f"{p}.max_clock_skew": t.max_clock_skew,
            }
        conf[f"{PREFIX}.exports"] = ",".join(self.exports)
        for name, e in self.exports.items():
            p = f"{PREFIX}.exports.{name}"
            conf |= {f"{p}.path": e.path, f"{p}.key": e.key, f"{p}.schema": e.schema,
                     f"{p}.track_history": ",".join(e.track_history)}
        return conf

    def pipeline_configuration(self) -> dict[str, str]:
        """The `configuration` of the pipeline a deployment creates: `to_conf()` and the
        pipeline's parameters (conf/'s `configuration:`, whose keys are never `exactly_once.*`)."""
        return self.to_conf() | dict(self.configuration)

    @classmethod
    def from_conf(cls, get: Callable[[str], str | None]) -> Settings:
        def required(key: str) -> str:
            value = get(f"{PREFIX}.{key}")
            if value is None or str(value).strip() == "":
                raise SettingsError(f"setting {PREFIX}.{key} is missing")
            return str(value).strip()

        def optional(key: str, default: str) -> str:
            value = get(f"{PREFIX}.{key}")
            return default if value is None else str(value).strip()

        def as_list(key: str) -> tuple[str, ...]:
            return tuple(v.strip() for v in optional(key, "").split(",") if v.strip())

        def positive(key: str, default: int) -> int:
            value = values.as_int(f"kafka.{key}", optional(f"kafka.{key}", str(default)))
            if value is None or value <= 0:
                raise SettingsError(f"setting {PREFIX}.kafka.{key} must be a positive integer, "
                                    f"got {value!r}")
            return value

        defaults = KafkaSettings  # its class attributes are the fields' defaults
        kafka = KafkaSettings(
            bootstrap_servers=required("kafka.bootstrap_servers"),
            starting_offsets=optional("kafka.starting_offsets", "earliest"),
            max_offsets_per_trigger=values.as_int("kafka.max_offsets_per_trigger",
                                            optional("kafka.max_offsets_per_trigger", "")),
            fail_on_data_loss=values.as_bool("kafka.fail_on_data_loss",
                                       optional("kafka.fail_on_data_loss", "true")),
            isolation_level=values.one_of("kafka.isolation_level",
                                    optional("kafka.isolation_level", defaults.isolation_level),
                                    ISOLATION_LEVELS),
            request_timeout_ms=positive("request_timeout_ms", defaults.request_timeout_ms),
            default_api_timeout_ms=positive("default_api_timeout_ms",
                                            defaults.default_api_timeout_ms),
            poll_timeout_ms=positive("poll_timeout_ms", defaults.poll_timeout_ms),
            fetch_offset_retries=positive("fetch_offset_retries", defaults.fetch_offset_retries),
            security_protocol=values.one_of("kafka.security_protocol",
                                      optional("kafka.security_protocol", "PLAINTEXT"),
                                      SECURITY_PROTOCOLS),
            sasl_mechanism=values.one_of("kafka.sasl_mechanism",
                                   optional("kafka.sasl_mechanism", "PLAIN"), SASL_MECHANISMS),
            secret_scope=optional("kafka.secret_scope", ""),
            sasl_username_key=optional("kafka.sasl_username_key", "kafka-sasl-username"),
            sasl_password_key=optional("kafka.sasl_password_key", "kafka-sasl-password"),
        )
        if kafka.default_api_timeout_ms < kafka.request_timeout_ms:
            # Kafka's admin client would silently raise it to the request timeout.
            raise SettingsError(f"setting {PREFIX}.kafka.default_api_timeout_ms "
                                f"({kafka.default_api_timeout_ms}) must be at least "
                                f"{PREFIX}.kafka.request_timeout_ms ({kafka.request_timeout_ms})")
        topics = {}
        for name in required("topics").split(","):
            p = f"topics.{name.strip()}"
            delay = values.interval(f"{p}.watermark_delay", required(f"{p}.watermark_delay"))
            max_age = optional(f"{p}.max_event_age", "")
            skew = optional(f"{p}.max_clock_skew", "")
            skew = skew and values.interval(f"{p}.max_clock_skew", skew)
            rules = values.as_rules(f"{p}.rules", optional(f"{p}.rules", "{}"))
            if OCCURRED_AT_IN_FUTURE in rules:
                raise SettingsError(f"setting {PREFIX}.{p}.rules: `{OCCURRED_AT_IN_FUTURE}` comes "
                                    f"from {PREFIX}.{p}.max_clock_skew, it is not configured")
            if skew:
                rules[OCCURRED_AT_IN_FUTURE] = occurred_at_in_future_rule(skew)
            topics[name.strip()] = TopicSettings(
                dataset_suffix=name.strip(),
                kafka_topic=required(f"{p}.topic"),
                key=required(f"{p}.key"),
                sequence_by=as_list(f"{p}.sequence_by") or values.missing(f"{p}.sequence_by"),
                delete_event_types=as_list(f"{p}.delete_event_types"),
                watermark_delay=delay,
                schema=required(f"{p}.schema"),
                rules=rules,
                max_event_age=max_age and values.interval(f"{p}.max_event_age", max_age),
                max_clock_skew=skew,
            )
        exports = {}
        for name in as_list("exports"):
            p = f"exports.{name}"
            exports[name] = ExportSettings(
                name=name, path=required(f"{p}.path"), key=required(f"{p}.key"),
                schema=required(f"{p}.schema"), track_history=as_list(f"{p}.track_history"))
        return cls(source=check_source(required("source")), kafka=kafka, topics=topics,
                   exports=exports)


def check_source(source: str) -> str:
    """`kafka`, or `file:` and the path of kcat dumps: a file, a directory or a glob."""
    if source != "kafka" and not (source.startswith(FILE_SOURCE) and
                                  len(source) > len(FILE_SOURCE)):
        raise SettingsError(f"setting {PREFIX}.source must be `kafka` or `file:PATH` (a kcat "
                            f"dump, a directory of dumps or a glob), got {source!r}")
    return source


def _flatten_yaml(doc: Mapping[str, Any]) -> dict[str, str]:
    """The YAML document as the flat keys `Settings.from_conf` reads."""
    flat: dict[str, str] = {f"{PREFIX}.source": str(doc.get("source", ""))}
    for key, value in (doc.get("kafka") or {}).items():
        flat[f"{PREFIX}.kafka.{key}"] = "" if value is None else str(value).lower() \
            if isinstance(value, bool) else str(value)
    for section in ("topics", "exports"):
        entries = doc.get(section) or {}
        flat[f"{PREFIX}.{section}"] = ",".join(entries)
        for name, entry in entries.items():
            for key, value in (entry or {}).items():
                if key == "rules":
                    value = json.dumps(value or {})
                elif isinstance(value, list):
                    value = ",".join(str(v) for v in value)
                flat[f"{PREFIX}.{section}.{name}.{key}"] = " ".join(str(value).split())
    return flat


def _exports_from_project_root(flat: dict[str, str], conf_dir: Path) -> dict[str, str]:
    """A relative export path in conf/ names a directory of the project (conf/'s parent)."""
    resolved = dict(flat)
    for key, value in flat.items():
        if (key.startswith(f"{PREFIX}.exports.") and key.endswith(".path") and value
                and not os.path.isabs(value) and "://" not in value):
            resolved[key] = str((conf_dir.parent / value).resolve())
    return resolved


def load_settings(target: str = "local", conf_dir: Path = CONF_DIR,
                  overrides: Mapping[str, str] | None = None) -> Settings:
    """Settings for a target from conf/base.yml + conf/targets/<target>.yml (+ flat overrides)."""
    document = target_document(target, conf_dir)
    flat = _exports_from_project_root(_flatten_yaml(document), conf_dir) | dict(overrides or {})
    return replace(Settings.from_conf(flat.get), configuration=configuration_from(document))


def setting_overrides(assignments: Sequence[str], target: str = "local",
                      conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """`KEY=VALUE` assignments of settings, keys as in conf/ (`kafka.fail_on_data_loss=false`),
    as the flat overrides `load_settings` takes. A key the settings do not have is an error, not
    a setting silently ignored; the values are checked when the settings are loaded."""
    known = load_settings(target, conf_dir).to_conf()
    overrides = {}
    for assignment in assignments:
        key, equals, value = assignment.partition("=")
        flat = f"{PREFIX}.{key.strip()}"
        if not equals or flat not in known:
            raise SettingsError(f"cannot set {assignment!r}: expected KEY=VALUE with KEY a "
                                "setting of conf/, e.g. kafka.fail_on_data_loss=false")
        overrides[flat] = value.strip()
    return overrides


def pipeline_settings(spark) -> Settings:
    """Settings as pipeline code sees them: from the Spark conf the runtime or bundle set."""
    return Settings.from_conf(lambda key: spark.conf.get(key, None))
