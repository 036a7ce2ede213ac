"""Notebooks as a bundle's pipeline libraries (src/exactly_once/bundle/): Databricks' source
format in Python and SQL, and Jupyter's, read as the cells a pipeline runs."""

from __future__ import annotations

import json
import re

import pytest
from bundle_files import (
    BUNDLES,
    the_user,  # noqa: F401 - autouse: every test runs as the same workspace user
    write,
)

from exactly_once.bundle import read_library
from exactly_once.errors import BundleError

PYTHON_NOTEBOOK = """\
# Databricks notebook source
# MAGIC %md
# MAGIC # Trips

# COMMAND ----------

# MAGIC %pip install simplejson==3.19.2

# COMMAND ----------

from pyspark import pipelines as dp


@dp.table
def trips():
    return spark.read.table("samples.nyctaxi.trips")
"""


def test_a_python_source_notebook_keeps_its_lines(tmp_path):
    path = write(tmp_path, {"nb.py": PYTHON_NOTEBOOK}) / "nb.py"
    language, text, pip = read_library(path)
    lines = text.split("\n")
    assert language == "python"
    assert len(lines) == len(PYTHON_NOTEBOOK.split("\n"))
    assert lines[10] == "from pyspark import pipelines as dp"  # line 11, as in the file
    assert "MAGIC" not in text and "COMMAND" not in text
    assert pip == ((7, "%pip install simplejson==3.19.2"),)
    compile(text, str(path), "exec")


def test_a_sql_source_notebook_ends_a_statement_with_each_cell(tmp_path):
    language, text, pip = read_library(BUNDLES / "sql_template_like/src/zip_report.sql")
    assert (language, pip) == ("sql", ())
    statements = [s.strip() for s in text.split(";") if s.strip()]
    assert [re.search(r"VIEW (\w+)", s).group(1) for s in statements] == [
        "zip_report", "busiest_zip"]
    assert text.split("\n")[7] == "CREATE OR REFRESH MATERIALIZED VIEW zip_report AS"


@pytest.mark.parametrize("cell, expected", [
    ("# MAGIC %sql\n# MAGIC SELECT 1", "nb.py:5: a %sql cell in a Python notebook: a pipeline "
     "source file has one language (move the cell to a SQL file)"),
    ("# MAGIC %run ./helpers", "nb.py:5: %run in a pipeline notebook is not run by the "
     "pipeline; import the code as a module"),
    ("# MAGIC %sh ls", "nb.py:5: %sh cells do not run in a pipeline"),
])
def test_a_cell_a_pipeline_does_not_run_is_refused_at_its_line(tmp_path, cell, expected):
    path = write(tmp_path, {"nb.py": "# Databricks notebook source\nx = 1\n\n"
                                     "# COMMAND ----------\n" + cell + "\n"}) / "nb.py"
    with pytest.raises(BundleError) as caught:
        read_library(path)
    assert expected in str(caught.value)


def test_a_jupyter_notebook_in_its_language(tmp_path):
    def notebook(language: str, cells: list[tuple[str, str]]) -> dict:
        return {"nbformat": 4, "nbformat_minor": 5, "cells": [
            {"cell_type": kind, "source": source.splitlines(keepends=True), "metadata": {}}
            for kind, source in cells],
            "metadata": {"application/vnd.databricks.v1+notebook": {"language": language}}}

    write(tmp_path, {
        "py.ipynb": json.dumps(notebook("python", [
            ("markdown", "# Trips"), ("code", "%pip install x"),
            ("code", "from pyspark import pipelines as dp\nx = 1")])),
        "sql.ipynb": json.dumps(notebook("sql", [
            ("code", "CREATE MATERIALIZED VIEW a AS SELECT 1"),
            ("code", "%sql\nCREATE MATERIALIZED VIEW b AS SELECT * FROM a")])),
        "bad.ipynb": json.dumps(notebook("python", [("code", "%scala\nval x = 1")]))})
    language, text, pip = read_library(tmp_path / "py.ipynb")
    assert language == "python" and [c for _, c in pip] == ["%pip install x"]
    assert "from pyspark import pipelines as dp\nx = 1" in text and "%pip" not in text
    compile(text, "py.ipynb", "exec")
    language, text, _ = read_library(tmp_path / "sql.ipynb")
    assert language == "sql"
    assert [re.search(r"VIEW (\w+)", s).group(1) for s in text.split(";") if "CREATE" in s] \
        == ["a", "b"]
    with pytest.raises(BundleError) as caught:
        read_library(tmp_path / "bad.ipynb")
    assert str(caught.value).endswith("bad.ipynb: cell 1: %scala cells do not run in a pipeline "
                                      "(Python or SQL only)")


def test_a_plain_file_is_its_source():
    path = BUNDLES / "python_template_like/src/taxi_etl/transformations/taxi_trips.py"
    assert read_library(path) == ("python", path.read_text(), ())
