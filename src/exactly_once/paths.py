"""Where the project keeps its local state. Everything here is git-ignored."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# What an installed package (no clone around it) makes on first use: jars, compiled parts
# (local/engine/jvm_parts.py).
USER_CACHE = Path(os.environ.get("EXACTLY_ONCE_CACHE") or Path.home() / ".cache" / "exactly-once")
CONF_DIR = PROJECT_ROOT / "conf"
PIPELINES_DIR = PROJECT_ROOT / "pipelines"
JARS_DIR = PROJECT_ROOT / ".cache" / "jars"
# The JVM's class-data-sharing archive of what an update loads (local/engine/class_archive.py).
CLASS_ARCHIVE = PROJECT_ROOT / ".cache" / "jvm" / "spark-classes.jsa"
# Hadoop's local file system without forks (local/engine/jvm/local-fs, local_fs.py).
LOCAL_FS_JAR = PROJECT_ROOT / ".cache" / "jvm" / "exactly-once-local-fs.jar"
# Hadoop without YARN's defaults (local/engine/jvm/hadoop-defaults, hadoop_defaults.py).
HADOOP_DEFAULTS_JAR = PROJECT_ROOT / ".cache" / "jvm" / "exactly-once-hadoop-defaults.jar"
# The local catalog's catalog level (local/engine/jvm/local-catalog, catalog_plugin.py).
LOCAL_CATALOG_JAR = PROJECT_ROOT / ".cache" / "jvm" / "exactly-once-local-catalog.jar"
# Runtime state (warehouse, broker data and logs) lives under .local unless told otherwise.
# (A package installed without its clone keeps it in the user cache.)
LOCAL_DIR = Path(os.environ.get("EXACTLY_ONCE_HOME")
                 or (PROJECT_ROOT / ".local" if (PROJECT_ROOT / "pyproject.toml").is_file()
                     else USER_CACHE / "local"))
DEFAULT_WAREHOUSE = LOCAL_DIR / "warehouse"
BROKER_DIR = LOCAL_DIR / "kafka"
# The local Spark standalone cluster (`exactly-once cluster start`): pids, logs, work dirs.
CLUSTER_DIR = LOCAL_DIR / "cluster"
# The resident engine (`exactly-once engine start`): its socket, pid file and log.
ENGINE_DIR = LOCAL_DIR / "engine"
# What the Spark JVM a command starts prints itself (start-up notes, anything outside its log
# level), appended; the command's own stderr keeps only its messages.
SPARK_LOG = LOCAL_DIR / "logs" / "spark.log"
# Traces of `exactly-once run --profile` (timeline.py).
PROFILES_DIR = LOCAL_DIR / "profiles"


PIPELINE_SUFFIXES = (".py", ".sql")  # Python and SQL source files, as Databricks runs both


def pipeline_files(root: Path = PIPELINES_DIR) -> list[Path]:
    """The pipeline's source files (Python and SQL), in order: what a bundle's `libraries: -
    glob: include: pipelines/**` deploys, and what the local runtime loads."""
    return sorted(p for p in root.rglob("*") if p.suffix in PIPELINE_SUFFIXES and p.is_file()
                  and "__pycache__" not in p.parts)
