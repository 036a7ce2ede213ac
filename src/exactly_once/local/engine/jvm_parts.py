"""The JVM parts the runtime adds to the pyspark wheel's Spark, found or made.

In a clone, `make setup` builds them under `.cache/` (paths.py). A package installed without the
clone (`pip install` of the repository by path or git URL, as a team installs the pytest
plugin) carries their sources instead (`jvm/` beside this module) and makes each on first use,
into the user cache (`EXACTLY_ONCE_CACHE`, default `~/.cache/exactly-once`):

    spark_jar_dir()        Delta's and the Kafka source's jars: jvm/spark-jars.lock, downloaded
                           from Maven Central and checked against their SHA-256
    local_fs_jar()         Hadoop's local file system without forks (local_fs.py), by javac
    catalog_jar()          the local catalog's Spark plugin (catalog_plugin.py), by javac
    hadoop_defaults_jar()  an empty yarn-default.xml (hadoop_defaults.py), zipped

Without `javac` (a JRE only) the two compiled parts are missing: the session runs without them
(local files through Hadoop's own classes; three-level names resolved in pipeline code, not in
Spark SQL). What was made once is reused: a part's file name carries its sources' hash.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.request
import zipfile
from pathlib import Path

import pyspark

from exactly_once.errors import MissingJarsError
from exactly_once.paths import (
    HADOOP_DEFAULTS_JAR,
    JARS_DIR,
    LOCAL_CATALOG_JAR,
    LOCAL_FS_JAR,
    USER_CACHE,
)

SOURCES = Path(__file__).parent / "jvm"
LOCK = SOURCES / "spark-jars.lock"
MAVEN_CENTRAL = os.environ.get("EXACTLY_ONCE_MAVEN_REPOSITORY",
                               "https://repo.maven.apache.org/maven2")
WHEEL_JARS = Path(pyspark.__file__).parent / "jars"
# javac's class path for each compiled part: the wheel's jars its sources use.
COMPILE_AGAINST = {
    "local-fs": ("hadoop-client-api-",),
    "local-catalog": ("spark-catalyst_", "spark-sql_", "spark-sql-api_", "spark-common-utils_",
                      "scala-library-"),
}


def spark_jar_dir() -> Path:
    """The folder of the jars the session adds: the clone's (`make jars`), else the user
    cache's, downloaded now if they are not there yet."""
    if any((JARS_DIR / "spark").glob("*.jar")):
        return JARS_DIR / "spark"
    folder = USER_CACHE / "jars" / "spark"
    for coordinates, digest in _locked():
        group, artifact, version = coordinates.split(":")
        jar = folder / f"{artifact}-{version}.jar"
        if not jar.is_file():
            _download(f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/"
                      f"{artifact}-{version}.jar", jar, digest)
    return folder


def _locked() -> list[tuple[str, str]]:
    lines = [line.split() for line in LOCK.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return [(coordinates, digest) for coordinates, digest in lines]


def _download(url: str, target: Path, digest: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 - Maven's https
            data = response.read()
    except OSError as err:
        raise MissingJarsError(f"cannot download {url}: {err}; run `make setup` in a clone, "
                               f"or set EXACTLY_ONCE_MAVEN_REPOSITORY to a mirror") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise MissingJarsError(f"{url}: not the jar {LOCK.name} names (SHA-256 differs)")
    partial = target.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(target)


def local_fs_jar() -> Path | None:
    return _compiled("local-fs", LOCAL_FS_JAR)


def catalog_jar() -> Path | None:
    return _compiled("local-catalog", LOCAL_CATALOG_JAR)


def hadoop_defaults_jar() -> Path | None:
    if HADOOP_DEFAULTS_JAR.is_file():
        return HADOOP_DEFAULTS_JAR
    sources = SOURCES / "hadoop-defaults"
    jar = _cached("hadoop-defaults", sources)
    if not jar.is_file():
        with tempfile.TemporaryDirectory(dir=_made(jar.parent)) as scratch:
            partial = Path(scratch) / jar.name
            with zipfile.ZipFile(partial, "w") as archive:
                for xml in sorted(sources.glob("*.xml")):
                    archive.write(xml, xml.name)
            partial.replace(jar)
    return jar


def _compiled(part: str, built: Path) -> Path | None:
    """The clone's jar of `part`, else one compiled into the user cache; None without javac."""
    if built.is_file():
        return built
    sources = SOURCES / part
    jar = _cached(part, sources)
    if jar.is_file():
        return jar
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar_tool is None:
        return None
    class_path = os.pathsep.join(str(j) for j in sorted(WHEEL_JARS.glob("*.jar"))
                                 if j.name.startswith(COMPILE_AGAINST[part]))
    with tempfile.TemporaryDirectory(dir=_made(jar.parent)) as scratch:
        classes = Path(scratch) / "classes"
        subprocess.run([javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp",
                        class_path, *map(str, sorted(sources.rglob("*.java")))],
                       check=True, capture_output=True)
        partial = Path(scratch) / jar.name
        subprocess.run([jar_tool, "--create", "--file", str(partial), "-C", str(classes), "."],
                       check=True, capture_output=True)
        partial.replace(jar)
    return jar


def _cached(part: str, sources: Path) -> Path:
    """Where the user cache keeps `part` made from `sources` as they are now."""
    digest = hashlib.sha256()
    for path in sorted(p for p in sources.rglob("*") if p.is_file()):
        digest.update(path.relative_to(sources).as_posix().encode() + b"\0" + path.read_bytes())
    return USER_CACHE / "jvm" / f"exactly-once-{part}-{digest.hexdigest()[:12]}.jar"


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder
