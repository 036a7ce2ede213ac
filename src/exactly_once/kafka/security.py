"""Kafka connection security for the Spark Kafka source, without credentials in any file.

`security_protocol` PLAINTEXT (the local broker) or SSL needs no credentials. SASL_PLAINTEXT /
SASL_SSL read a username and password at run time:

* on Databricks, from the secret scope `kafka.secret_scope` (keys `kafka.sasl_username_key` and
  `kafka.sasl_password_key`) with `dbutils.secrets.get`; create them with
  `databricks secrets put-secret <scope> <key>`;
* anywhere else, from the environment variables EXACTLY_ONCE_KAFKA_SASL_USERNAME and
  EXACTLY_ONCE_KAFKA_SASL_PASSWORD.

A SASL protocol without credentials fails before the stream starts, naming what is missing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from exactly_once.errors import SettingsError
from exactly_once.settings.pipeline import PREFIX, KafkaSettings

USERNAME_ENV = "EXACTLY_ONCE_KAFKA_SASL_USERNAME"
PASSWORD_ENV = "EXACTLY_ONCE_KAFKA_SASL_PASSWORD"

# The Kafka client inside Databricks Runtime is relocated under `kafkashaded.` (so it cannot clash
# with a Kafka client a user installs), and a JAAS config naming the unshaded class fails there
# with "No LoginModule found". Open-source Spark loads the plain `org.apache.kafka` client from
# spark-sql-kafka, where only the unshaded name exists. So the class is picked by where we run.
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
DATABRICKS_SHADE_PREFIX = "kafkashaded."


def on_databricks(env: Mapping[str, str] = os.environ) -> bool:
    """True inside Databricks Runtime (clusters, pipelines, serverless): it sets this variable."""
    return "DATABRICKS_RUNTIME_VERSION" in env


def login_module(mechanism: str, databricks: bool) -> str:
    module = _LOGIN_MODULES[mechanism]
    return DATABRICKS_SHADE_PREFIX + module if databricks else module


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kafka_security_options(
    kafka: KafkaSettings,
    *,
    env: Mapping[str, str] = os.environ,
    secret: Callable[[str, str], str] | None = None,
    databricks: bool | None = None,
) -> dict[str, str]:
    """The `kafka.*` reader options for the configured security protocol.

    `secret(scope, key)` reads a Databricks secret; by default `dbutils.secrets.get`. Tests pass
    their own `env` / `secret`.
    """
    options = {"kafka.security.protocol": kafka.security_protocol}
    if not kafka.security_protocol.startswith("SASL_"):
        return options
    databricks = on_databricks(env) if databricks is None else databricks
    if databricks:
        if not kafka.secret_scope:
            raise SettingsError(f"setting {PREFIX}.kafka.secret_scope is missing: "
                                f"{kafka.security_protocol} on Databricks reads the SASL "
                                "credentials from a secret scope")
        read = secret or _dbutils_secret
        username = read(kafka.secret_scope, kafka.sasl_username_key)
        password = read(kafka.secret_scope, kafka.sasl_password_key)
    else:
        missing = [name for name in (USERNAME_ENV, PASSWORD_ENV) if not env.get(name)]
        if missing:
            raise SettingsError(f"{kafka.security_protocol} needs the SASL credentials in the "
                                f"environment: {', '.join(missing)} not set")
        username, password = env[USERNAME_ENV], env[PASSWORD_ENV]
    module = login_module(kafka.sasl_mechanism, databricks)
    return options | {
        "kafka.sasl.mechanism": kafka.sasl_mechanism,
        "kafka.sasl.jaas.config": f"{module} required username={_jaas_quote(username)} "
                                  f"password={_jaas_quote(password)};",
    }


def _dbutils_secret(scope: str, key: str) -> str:  # pragma: no cover - Databricks only
    try:  # serverless and Spark Connect
        from databricks.sdk.runtime import dbutils
    except ImportError:  # classic Databricks Runtime
        from pyspark.dbutils import DBUtils
        from pyspark.sql import SparkSession

        dbutils = DBUtils(SparkSession.getActiveSession())
    return dbutils.secrets.get(scope=scope, key=key)
