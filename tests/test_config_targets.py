"""Per-target settings (local, dev, prod) and Kafka security from env vars / secret scopes."""

from __future__ import annotations

import pytest

from exactly_once.errors import SettingsError
from exactly_once.kafka.security import (
    PASSWORD_ENV,
    USERNAME_ENV,
    kafka_security_options,
    login_module,
)
from exactly_once.settings.pipeline import Settings, load_settings

TARGETS = ["local", "dev", "prod"]


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_loads_and_round_trips_through_spark_conf(target):
    settings = load_settings(target)
    assert Settings.from_conf(settings.to_conf().get) == settings
    assert set(settings.topics) == {"orders", "player_rewards"}


def test_local_uses_the_plaintext_loopback_broker_and_databricks_targets_use_sasl():
    assert load_settings("local").kafka.security_protocol == "PLAINTEXT"
    assert load_settings("local").kafka.bootstrap_servers.startswith("127.0.0.1:")
    for target in ("dev", "prod"):
        kafka = load_settings(target).kafka
        assert kafka.security_protocol == "SASL_SSL"
        assert kafka.secret_scope, target


def test_targets_override_watermark_delays():
    assert load_settings("dev").topic("orders").watermark_delay == "10 minutes"
    assert load_settings("prod").topic("orders").watermark_delay == "1 hour"


@pytest.mark.parametrize("key, value, message", [
    ("exactly_once.kafka.security_protocol", "SASL_TLS",
     "exactly_once.kafka.security_protocol must be one of PLAINTEXT, SSL"),
    ("exactly_once.kafka.sasl_mechanism", "GSSAPI",
     "exactly_once.kafka.sasl_mechanism must be one of PLAIN"),
    ("exactly_once.topics.player_rewards.watermark_delay", "",
     "exactly_once.topics.player_rewards.watermark_delay is missing"),
])
def test_a_wrong_security_or_delay_setting_fails_naming_it(key, value, message):
    conf = load_settings("prod").to_conf() | {key: value}
    with pytest.raises(SettingsError, match=message):
        Settings.from_conf(conf.get)


def test_plaintext_needs_no_credentials():
    kafka = load_settings("local").kafka
    assert kafka_security_options(kafka, env={}) == {"kafka.security.protocol": "PLAINTEXT"}


def test_sasl_locally_reads_the_environment_and_uses_the_open_source_login_module():
    kafka = load_settings("dev").kafka
    options = kafka_security_options(kafka, env={USERNAME_ENV: "svc", PASSWORD_ENV: 'p"w\\d'})
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "PLAIN"
    assert options["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="svc" password="p\\"w\\\\d";')


def test_sasl_locally_without_credentials_names_the_missing_variables():
    kafka = load_settings("dev").kafka
    with pytest.raises(SettingsError, match=PASSWORD_ENV):
        kafka_security_options(kafka, env={USERNAME_ENV: "svc"})


def test_sasl_on_databricks_reads_the_secret_scope_and_uses_the_shaded_login_module():
    kafka = load_settings("prod").kafka
    asked = []

    def secret(scope, key):
        asked.append((scope, key))
        return f"<{key}>"

    options = kafka_security_options(
        kafka, env={"DATABRICKS_RUNTIME_VERSION": "client.4.0",
                    USERNAME_ENV: "ignored", PASSWORD_ENV: "ignored"},
        secret=secret)
    assert asked == [("exactly-once-prod", "kafka-sasl-username"),
                     ("exactly-once-prod", "kafka-sasl-password")]
    assert options["kafka.sasl.jaas.config"].startswith(
        "kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="<kafka-sasl-username>"')


def test_sasl_on_databricks_without_a_secret_scope_fails_naming_the_setting():
    conf = load_settings("prod").to_conf() | {"exactly_once.kafka.secret_scope": ""}
    kafka = Settings.from_conf(conf.get).kafka
    with pytest.raises(SettingsError, match="exactly_once.kafka.secret_scope is missing"):
        kafka_security_options(kafka, databricks=True, secret=lambda s, k: "x")


def test_scram_uses_the_scram_login_module():
    assert login_module("SCRAM-SHA-512", databricks=False) == \
        "org.apache.kafka.common.security.scram.ScramLoginModule"
