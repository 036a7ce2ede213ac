"""What installing the package pulls in, wherever it is installed."""

from pathlib import Path

import tomllib

PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]


def test_databricks_installs_no_spark_of_its_own():
    """The bundle installs the package into Databricks environments, whose runtime has Spark."""
    names = [dep.split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip().lower()
             for dep in PYPROJECT["dependencies"]]
    assert not {"pyspark", "delta-spark"} & set(names)


def test_the_local_extra_pins_the_runtime():
    local = PYPROJECT["optional-dependencies"]["local"]
    assert "pyspark[pipelines]==4.2.0" in local and "delta-spark==4.4.1" in local
