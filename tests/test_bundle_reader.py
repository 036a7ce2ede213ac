"""A Databricks Asset Bundle read as the Databricks CLI reads it (src/exactly_once/bundle/): the
bundles under tests/bundles/, and a bad bundle in tmp_path for each error. Pure Python.

The expected values of the four test bundles are what the Databricks CLI (v0.298.0, `bundle
validate -o json` against a stub workspace whose user is ci@example.com) gave for them.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli_errors import covers

from exactly_once.bundle import load_bundle, read_library
from exactly_once.bundle.current_user import domain_friendly_name, short_name
from exactly_once.errors import BundleError

BUNDLES = Path(__file__).parent / "bundles"
USER = "ci@example.com"


@pytest.fixture(autouse=True)
def the_user(monkeypatch):
    monkeypatch.setenv("EXACTLY_ONCE_USER_NAME", USER)
    for name in ("DATABRICKS_BUNDLE_ROOT", "BUNDLE_VAR_currency", "BUNDLE_VAR_min_fare"):
        monkeypatch.delenv(name, raising=False)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def refused(root: Path | None = None, **kwargs) -> str:
    with pytest.raises(BundleError) as caught:
        load_bundle(root, **kwargs)
    assert "\n" not in str(caught.value)
    return str(caught.value)


BASE = """
bundle:
  name: b
targets:
  dev:
    default: true
    mode: development
variables:
  catalog:
    default: main
"""


def with_target(text: str) -> str:
    """BASE with `text` (a target, indented) in its `targets`."""
    return BASE.replace("targets:\n", "targets:\n" + text)


def a_bundle(tmp_path: Path, pipeline: str, base: str = BASE, **files: str) -> Path:
    return write(tmp_path, {"databricks.yml": base + "include:\n  - resources/*.yml\n",
                            "resources/p.pipeline.yml": pipeline,
                            "src/a.py": "x = 1\n", "src/b.sql": "SELECT 1;\n", **files})


def pipeline_yml(body: str) -> str:
    return "resources:\n  pipelines:\n    p:\n" + textwrap.indent(
        textwrap.dedent(body).lstrip("\n"), " " * 6)


# -- the test bundles ---------------------------------------------------------------------------
def test_the_python_template_like_bundle_in_its_default_target():
    bundle = load_bundle(BUNDLES / "python_template_like")
    assert (bundle.name, bundle.target, bundle.mode) == ("taxi_python", "dev", "development")
    assert bundle.variables == {"catalog": "dev_catalog", "schema": "ci"}
    etl = bundle.pipeline()
    root = BUNDLES / "python_template_like"
    assert (etl.key, etl.name, etl.catalog, etl.schema) == (
        "taxi_etl", "[dev ci] taxi_etl", "dev_catalog", "ci")
    assert etl.root_path == root / "src/taxi_etl"
    assert etl.libraries == (root / "src/taxi_etl/transformations/fares_by_zip.py",
                             root / "src/taxi_etl/transformations/taxi_trips.py")
    assert etl.declared_in == root / "resources/taxi_etl.pipeline.yml"
    assert etl.configuration == {}
    assert etl.no_local_meaning == {"serverless": True, "development": True,
                                    "environment": {"dependencies": [f"--editable {root}"]}}
    assert bundle.ignored == {"workspace": {"host": "https://example.cloud.databricks.com"}}


def test_the_python_template_like_bundle_in_production():
    bundle = load_bundle(BUNDLES / "python_template_like", target="prod")
    etl = bundle.pipeline("taxi_etl")
    assert (bundle.mode, etl.name, etl.catalog, etl.schema) == (
        "production", "taxi_etl", "prod_catalog", "taxis")
    assert "development" not in etl.no_local_meaning
    assert bundle.ignored["workspace"] == {
        "host": "https://example.cloud.databricks.com",
        "root_path": "/Workspace/Users/deployer@example.com/.bundle/taxi_python/prod"}
    assert bundle.ignored["permissions"] == [{"user_name": "deployer@example.com",
                                              "level": "CAN_MANAGE"}]


def test_a_pipeline_publishes_into_the_bundles_schema_resource_prefixed_in_development():
    root = BUNDLES / "sql_template_like"
    dev = load_bundle(root).pipeline()
    assert (dev.name, dev.catalog, dev.schema) == (
        "[dev ci] Taxi trips in SQL", "main", "dev_ci_taxi_reports")  # `target:`, the older key
    assert dev.libraries == (root / "src/short_trips.sql", root / "src/zip_report.sql")
    prod = load_bundle(root, target="prod").pipeline()
    assert (prod.name, prod.schema) == ("Taxi trips in SQL", "taxi_reports")


def test_two_pipelines_one_reading_the_other_with_a_complex_variable_as_configuration():
    bundle = load_bundle(BUNDLES / "multi_pipeline")
    assert sorted(bundle.pipelines) == ["ingest", "report"]
    assert bundle.variables["report_settings"] == {"report.source": "main.taxi_ci.raw_trips",
                                                   "report.min_trips": 1}
    report = bundle.pipeline("report")
    assert report.configuration == {"report.source": "main.taxi_ci.raw_trips",
                                    "report.min_trips": "1"}
    assert report.no_local_meaning["notifications"] == [
        {"email_recipients": ["data-team@example.com"], "alerts": ["on-update-failure"]}]
    ingest = bundle.pipeline("ingest")
    assert ingest.configuration == {"ingest.label": "development", "ingest.owner": USER}
    assert ingest.no_local_meaning["photon"] is True
    assert ingest.no_local_meaning["clusters"] == [{"label": "default", "num_workers": 1}]


def test_a_targets_resources_merge_over_the_top_level_ones():
    ingest = load_bundle(BUNDLES / "multi_pipeline", target="prod").pipeline("ingest")
    assert ingest.configuration == {"ingest.label": "production", "ingest.owner": USER}
    assert ingest.no_local_meaning["photon"] is False
    assert ingest.schema == "taxi"


def test_several_pipelines_need_a_key_and_an_unknown_key_lists_them():
    bundle = load_bundle(BUNDLES / "multi_pipeline")
    for key in (None, "nope"):
        with pytest.raises(BundleError) as caught:
            bundle.pipeline(key)
        assert str(caught.value).endswith("ingest, report")
        assert "multi_pipeline/databricks.yml: resources.pipelines: " in str(caught.value)


def test_configuration_values_are_strings_and_root_path_is_a_folder():
    bundle = load_bundle(BUNDLES / "root_path_and_configuration")
    fares = bundle.pipeline()
    assert fares.name == "[dev ci] taxi_fares_dev"
    assert fares.schema == "fares_dev"
    assert fares.configuration == {"fares.min_fare": "3", "fares.currency": "USD",
                                   "fares.rounded": "true"}
    assert fares.root_path == BUNDLES / "root_path_and_configuration/src/fares"
    assert (fares.root_path / "fare_rules/__init__.py").is_file()


def test_var_beats_the_environment_which_beats_the_target(monkeypatch):
    root = BUNDLES / "root_path_and_configuration"
    monkeypatch.setenv("BUNDLE_VAR_min_fare", "4")
    monkeypatch.setenv("BUNDLE_VAR_currency", "EUR")
    fares = load_bundle(root, variables={"min_fare": "7"}).pipeline()
    assert fares.configuration["fares.min_fare"] == "7"
    assert fares.configuration["fares.currency"] == "EUR"
    monkeypatch.delenv("BUNDLE_VAR_min_fare")
    assert load_bundle(root).pipeline().configuration["fares.min_fare"] == "3"  # the target's
    assert load_bundle(root, "prod").pipeline().configuration["fares.min_fare"] == "5"


def test_the_bundle_is_found_upward_from_the_current_folder(monkeypatch):
    root = BUNDLES / "python_template_like"
    monkeypatch.chdir(root / "src" / "taxi_etl")
    assert load_bundle().root == root
    monkeypatch.setenv("DATABRICKS_BUNDLE_ROOT", str(BUNDLES / "sql_template_like"))
    assert load_bundle().name == "taxi_sql"


# -- the CLI's rules, one by one --------------------------------------------------------------
@pytest.mark.parametrize("user, short, friendly", [
    ("test.user.1234@example.com", "test_user_1234", "test-user-1234"),
    ("tést.üser@example.com", "tést_üser", "test-user"),
    ("first+tag@email.com", "first_tag", "first-tag"),
    ('"_quoted"@domain.com', "quoted", "quoted"),
    ("John.Doe@COMPANY.COM", "john_doe", "john-doe"),
    ("test...user___name@example.com", "test_user_name", "test-user-name"),
    ("alice", "alice", "alice"),
])
def test_short_names_as_the_cli_derives_them(user, short, friendly):
    assert (short_name(user), domain_friendly_name(user)) == (short, friendly)


def test_the_os_user_stands_for_the_workspace_user(tmp_path, monkeypatch):
    monkeypatch.delenv("EXACTLY_ONCE_USER_NAME")
    monkeypatch.setattr("getpass.getuser", lambda: "Bob.Smith")
    root = a_bundle(tmp_path, pipeline_yml("""
        name: p
        schema: ${workspace.current_user.short_name}
        configuration:
          user: ${workspace.current_user.userName}
          host: ${workspace.current_user.domain_friendly_name}
          files: ${workspace.file_path}/data
          root: ${workspace.root_path}
    """))
    p = load_bundle(root).pipeline()
    assert (p.name, p.schema) == ("[dev bob_smith] p", "bob_smith")
    assert p.configuration == {"user": "Bob.Smith", "host": "bob-smith",
                               "files": f"{tmp_path}/data",
                               "root": "/Workspace/Users/Bob.Smith/.bundle/b/dev"}


def test_includes_targets_and_the_older_names(tmp_path):
    root = write(tmp_path, {
        "bundle.yml": """
            bundle:
              name: old
            include:
              - conf/*.yml
            environments:
              staging:
                variables:
                  where: ${bundle.environment}-${bundle.target}
        """,
        "conf/vars.yml": "variables:\n  where:\n    default: x\n",
        "conf/p.yml": pipeline_yml("name: ${var.where}\nlibraries:\n  - file:\n      path: "
                                   "../src/a.py\n"),
        "src/a.py": "x = 1\n"})
    bundle = load_bundle(root)
    assert (bundle.target, bundle.mode, bundle.pipeline().name) == ("staging", None,
                                                                    "staging-staging")


def test_yaml_is_read_as_yaml_1_2(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("""
        configuration:
          a: on
          b: yes
          c: 0755
          d: 2024-01-01
          e: True
          f: 1.5
        libraries:
          - file:
              path: ../src/a.py
    """))
    assert load_bundle(root).pipeline().configuration == {
        "a": "on", "b": "yes", "c": "755", "d": "2024-01-01", "e": "true", "f": "1.5"}


def test_references_the_cli_does_not_resolve_stay_as_written(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("""
        configuration:
          sql: SELECT * FROM ${source_table}
          deployed_id: x
        tags:
          job: ${resources.jobs.nightly.id}
          via_variable: ${var.job}
        libraries:
          - file:
              path: ../src/a.py
    """), base=BASE + "  job:\n    default: ${resources.jobs.nightly.id}\n",
        **{"resources/nightly.job.yml": "resources:\n  jobs:\n    nightly:\n      name: n\n"})
    p = load_bundle(root).pipeline()
    assert p.configuration["sql"] == "SELECT * FROM ${source_table}"
    assert p.no_local_meaning["tags"] == {"job": "${resources.jobs.nightly.id}",
                                          "via_variable": "${var.job}"}


def test_a_notebook_a_file_and_a_glob_in_order_each_file_once(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("""
        libraries:
          - notebook:
              path: ../src/nb.py
          - glob:
              include: ../src/**
          - file:
              path: ../src/a.py
          - jar: /Volumes/main/libs/x.jar
    """), **{"src/nb.py": "# Databricks notebook source\nx = 1\n",
             "src/deep/c.sql": "SELECT 2;\n", "src/notes.md": "# not code\n",
             "src/__pycache__/a.cpython-311.py": ""})
    p = load_bundle(root).pipeline()
    src = tmp_path / "src"
    assert p.libraries == (src / "nb.py", src / "a.py", src / "b.sql", src / "deep/c.sql")
    assert p.no_local_meaning["libraries"] == [{"jar": "/Volumes/main/libs/x.jar"}]


# -- bad bundles: one line each, naming the file and the key ---------------------------------
def test_no_databricks_yml(tmp_path, monkeypatch):
    assert refused(tmp_path) == f"{tmp_path}: no databricks.yml (nor databricks.yaml, " \
                                f"bundle.yml, bundle.yaml) in this folder"
    monkeypatch.chdir(tmp_path)
    assert refused().startswith(f"no databricks.yml in {tmp_path} or any folder above it")
    write(tmp_path, {"databricks.yml": BASE, "bundle.yml": BASE})
    assert "several bundle configuration files (databricks.yml, bundle.yml)" in refused()


def test_invalid_yaml_names_the_file_and_line(tmp_path):
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\nvariables: [\n"})
    assert refused(tmp_path).startswith(f"{tmp_path}/databricks.yml:4: invalid YAML: ")
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\n  name: c\n"})
    assert refused(tmp_path) == (f"{tmp_path}/databricks.yml:3: invalid YAML: mapping key "
                                 f"`name` already defined")


def test_an_unknown_target_lists_the_targets(tmp_path):
    message = refused(BUNDLES / "python_template_like", target="staging")
    assert message.endswith("databricks.yml: targets: no target `staging`; the bundle's "
                            "targets: dev, prod")
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\ntargets:\n  a: {}\n  b: {}\n"})
    assert refused(tmp_path).endswith("none is marked `default: true`; name one of a, b")


def test_a_variable_without_a_value_is_named(tmp_path):
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\nvariables:\n  catalog:\n"
                                       "    description: c\n"})
    assert refused(tmp_path) == (f"{tmp_path}/databricks.yml:5: variables.catalog: no value "
                                 f"for variable `catalog` in target `default`; set its "
                                 f"`default` (or the target's `variables`), or pass --var "
                                 f"catalog=... or BUNDLE_VAR_catalog")
    write(tmp_path, {"databricks.yml": BASE})
    assert refused(tmp_path, variables={"nope": "1"}).startswith(
        "--var nope=...: variable `nope` is not declared in the bundle")


def test_an_unresolved_reference_names_the_file_line_and_key(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("""
        catalog: ${var.catalog}
        schema: ${var.schema}
    """))
    assert refused(root) == (f"{tmp_path}/resources/p.pipeline.yml:5: resources.pipelines.p"
                             f".schema: reference does not exist: ${{var.schema}}")


def test_a_cycle_of_references(tmp_path):
    base = BASE.replace("    default: main\n",
                        "    default: ${var.schema}\n  schema:\n    default: x_${var.catalog}\n")
    root = a_bundle(tmp_path, pipeline_yml("catalog: ${var.catalog}\n"), base=base)
    message = refused(root)
    assert "cycle detected in references: ${var.catalog} -> ${var.schema} -> ${var.catalog}" \
        in message or "cycle detected in references: ${var.schema} -> ${var.catalog} -> " \
        "${var.schema}" in message
    assert message.startswith(f"{tmp_path}/databricks.yml:")


def test_a_lookup_variable_is_refused_where_it_is_used(tmp_path):
    base = BASE + "  warehouse:\n    lookup:\n      warehouse: Shared\n"
    pipeline = pipeline_yml("configuration:\n  wh: ${var.warehouse}\n")
    root = a_bundle(tmp_path, pipeline, base=base)
    assert refused(root) == (
        f"{tmp_path}/resources/p.pipeline.yml:5: resources.pipelines.p.configuration.wh: "
        f"${{var.warehouse}} has no local value: variable `warehouse` is a `lookup`, which "
        f"needs a workspace; give it a value with --var warehouse=... or BUNDLE_VAR_warehouse")
    given = load_bundle(root, variables={"warehouse": "abc"})
    assert given.pipeline().configuration == {"wh": "abc"}
    unused = a_bundle(tmp_path, pipeline_yml("name: p\n"), base=base)
    assert load_bundle(unused).ignored["variables (lookup)"] == {
        "warehouse": {"warehouse": "Shared"}}


def test_references_with_no_local_value(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("configuration:\n  id: "
                                           "${workspace.current_user.id}\n"))
    assert refused(root).endswith("resources.pipelines.p.configuration.id: "
                                  "${workspace.current_user.id} has no local value: the "
                                  "workspace user's `id` is known only on a workspace; locally "
                                  f"the user is `{USER}`")
    root = a_bundle(tmp_path, pipeline_yml("configuration:\n  me: ${resources.pipelines.p.id}\n"))
    assert refused(root).endswith("${resources.pipelines.p.id} is known only once the bundle "
                                  "is deployed; it has no local value")


@pytest.mark.parametrize("library, files, expected", [
    ("glob:\n  include: ../src/none/**", {}, "resources.pipelines.p.libraries[0].glob.include: "
     "`../src/none/**` matches no Python or SQL source file"),
    ("file:\n  path: ../src/gone.py", {}, "resources.pipelines.p.libraries[0].file.path: file "
     "`../src/gone.py` not found"),
    ("notebook:\n  path: ../src/nb", {"src/nb.py": "# Databricks notebook source\n"},
     "notebook `../src/nb` not found; did you mean `../src/nb.py`? (the Databricks CLI wants "
     "a local notebook's extension)"),
    ("file:\n  path: ../src/nb.py", {"src/nb.py": "# Databricks notebook source\n"},
     "`../src/nb.py` is a notebook; list it as `notebook: path:`"),
    ("notebook:\n  path: ../src/a.py", {}, "`../src/a.py` is not a notebook"),
    ("glob:\n  include: ../src/**\n  exclude: ../src/b.sql", {},
     "libraries[0].glob: `exclude` is not a setting of a `glob` library"),
    ("file:\n  path: /Workspace/Users/me/a.py", {}, "`/Workspace/Users/me/a.py` is a workspace "
     "path, which has no local copy"),
    ("file:\n  path: ../../elsewhere.py", {}, "is outside the bundle's folder"),
    ("glob:\n  include: ../src", {}, "`../src` is a folder; write `../src/**` to include its "
     "files"),
])
def test_a_library_that_matches_nothing_or_is_not_what_it_says(tmp_path, library, files,
                                                               expected):
    root = a_bundle(tmp_path / "b", pipeline_yml("libraries:\n  - " +
                                                 library.replace("\n", "\n    ") + "\n"),
                    **files)
    message = refused(root)
    assert message.startswith(f"{tmp_path}/b/resources/p.pipeline.yml:")
    assert expected in message


def test_the_bundles_own_rules(tmp_path):
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\ninclude:\n  - resources/p.yml\n"})
    assert refused(tmp_path).endswith("include: `resources/p.yml` does not match any file")
    write(tmp_path, {"databricks.yml": "bundle:\n  name: b\ninclude:\n  - src/*\n",
                     "src/a.py": ""})
    assert "which is not a YAML or JSON file" in refused(tmp_path)
    write(tmp_path, {"databricks.yml": "include: []\n"})
    assert refused(tmp_path).endswith("databricks.yml: bundle.name: not set (every bundle has "
                                      "a name)")
    write(tmp_path, {"databricks.yml": with_target("  prod:\n    variables:\n      other: 1\n")})
    assert "targets.prod.variables.other: variable `other` is not defined" in \
        refused(tmp_path, target="prod")
    write(tmp_path, {"databricks.yml": BASE.replace("development", "testing")})
    assert "`testing` is not a mode" in refused(tmp_path)
    write(tmp_path, {"databricks.yml": with_target("  prod:\n    variables:\n      catalog: 1\n")})
    assert load_bundle(tmp_path, target="prod").variables == {"catalog": 1}  # a bare default


def test_a_resource_key_defined_twice_and_a_merge_of_two_types(tmp_path):
    root = a_bundle(tmp_path, pipeline_yml("name: p\n"),
                    **{"resources/q.yml": pipeline_yml("name: q\n")})
    assert "resources.pipelines.p: defined in" in refused(root)
    base = with_target("  prod:\n    resources:\n      pipelines:\n        p:\n"
                       "          photon: yes\n")
    root = a_bundle(tmp_path, pipeline_yml("photon: true\n"), base=base)
    (tmp_path / "resources/q.yml").unlink()
    assert refused(root, target="prod").endswith("resources.pipelines.p.photon: cannot merge "
                                                 "bool with string "
                                  "(a target or included file sets it as another type)")


def test_variable_overrides_file_and_complex_variables(tmp_path):
    base = BASE + "  conf:\n    type: complex\n    default:\n      k: v\n"
    root = a_bundle(tmp_path, pipeline_yml("configuration: ${var.conf}\n"), base=base)
    assert load_bundle(root).pipeline().configuration == {"k": "v"}
    write(tmp_path, {".databricks/bundle/dev/variable-overrides.json":
                     json.dumps({"conf": {"k": "from file"}, "catalog": "c2"})})
    bundle = load_bundle(root)
    assert bundle.pipeline().configuration == {"k": "from file"}
    assert bundle.variables["catalog"] == "c2"
    assert "variable `conf` is complex" in refused(root, variables={"conf": "x"})


# -- notebooks ----------------------------------------------------------------------------------
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


@covers(BundleError)
def test_a_bundle_error_is_one_line_naming_the_file(tmp_path):
    """The other tests check their messages with `refused`, which also asserts one line."""
    root = a_bundle(tmp_path, pipeline_yml("schema: ${var.nope}\n"))
    assert refused(root).startswith(f"{tmp_path}/resources/p.pipeline.yml:4: ")


PYDABS_RESOURCES = """
from databricks.bundles.core import Bundle, Resources, Variable, variables
from databricks.bundles.pipelines import Pipeline


@variables
class Vars:
    catalog: Variable[str]


def load_resources(bundle: Bundle) -> Resources:
    resources = Resources()
    resources.add_pipeline("etl", Pipeline.from_dict({
        "name": f"etl_{bundle.target}",
        "catalog": bundle.resolve_variable(Vars.catalog),
        "schema": "${workspace.current_user.short_name}",
        "root_path": "src",
        "libraries": [{"glob": {"include": "src/*.sql"}}],
    }))
    return resources
"""

PYDABS_MUTATORS = """
from dataclasses import replace

from databricks.bundles.core import Bundle, pipeline_mutator
from databricks.bundles.pipelines import Pipeline


@pipeline_mutator
def add_configuration(bundle: Bundle, pipeline: Pipeline) -> Pipeline:
    return replace(pipeline, configuration={**(pipeline.configuration or {}), "tagged": "yes"})
"""


def test_resources_and_mutators_written_in_python_run_as_the_cli_runs_them(tmp_path):
    """The `pydabs` template's bundle declares its pipeline in Python (`python.resources`); the
    Databricks CLI runs it with the databricks-bundles package (in `python.venv_path`), then
    the mutators, which may change YAML pipelines too. Paths in Python resources are relative
    to the bundle's folder."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the suite's Python has the package
    python = ("python:\n  venv_path: .venv\n  resources:\n    - 'resources:load_resources'\n"
              "  mutators:\n    - 'mutators:add_configuration'\n")
    root = a_bundle(tmp_path, pipeline_yml("name: p\nlibraries:\n  - file:\n      path: "
                                           "../src/a.py\n"), base=BASE + python,
                    **{"resources/__init__.py": PYDABS_RESOURCES,
                       "mutators.py": PYDABS_MUTATORS})
    bundle = load_bundle(root)
    assert sorted(bundle.pipelines) == ["etl", "p"]
    etl = bundle.pipeline("etl")
    assert (etl.name, etl.catalog, etl.schema, etl.root_path) == (
        "[dev ci] etl_dev", "main", "ci", tmp_path / "src")
    assert [str(library) for library in etl.libraries] == [f"{tmp_path}/src/b.sql"]
    assert etl.configuration == {"tagged": "yes"}
    p = bundle.pipeline("p")  # written in YAML, changed by the mutator
    assert ([str(library) for library in p.libraries], p.configuration) == (
        [f"{tmp_path}/src/a.py"], {"tagged": "yes"})
    assert "python" not in bundle.ignored


def test_python_resources_that_fail_are_one_line(tmp_path):
    python = "python:\n  venv_path: .venv\n  resources:\n    - 'resources:load_resources'\n"
    root = a_bundle(tmp_path, pipeline_yml("name: p\n"), base=BASE + python,
                    **{"resources/__init__.py": "def load_resources(bundle):\n"
                                                "    raise ValueError('no catalog here')\n"})
    assert refused(root) == (f"{tmp_path}/databricks.yml:11: python.venv_path: `.venv` has no "
                             f"Python ({tmp_path}/.venv/bin/python); create it with the "
                             "bundle's dependencies, databricks-bundles among them (`uv sync`, "
                             "as Databricks' templates do)")
    # A Python without the package: the suite's own, with no site-packages.
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (tmp_path / ".venv" / "bin" / "python").chmod(0o755)
    assert refused(root) == (f"{tmp_path}/databricks.yml:13: python.resources: "
                             f"{tmp_path}/.venv/bin/python has no databricks-bundles package, "
                             "which runs resources written in Python (pip install "
                             "databricks-bundles)")
    shutil.rmtree(tmp_path / ".venv")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    message = refused(root)
    assert message.startswith(f"{tmp_path}/databricks.yml:13: python.resources: ")
    assert message.endswith("ValueError: no catalog here")
    # A venv alone changes nothing locally: shown by dry-run as without local meaning.
    venv = a_bundle(tmp_path / "venv", pipeline_yml("name: p\n"),
                    base=BASE + "python:\n  venv_path: .venv\n")
    assert load_bundle(venv).ignored["python"] == {"venv_path": ".venv"}


def test_an_empty_value_is_null_as_the_cli_reads_it(tmp_path):
    """YAML 1.2 reads `key:` with nothing after it as null, and the Databricks CLI takes a null
    map as an empty one: `targets:` whose entries are all commented out (as in Databricks'
    contrib `generic_sdp_monitoring_dab`) is a bundle without targets."""
    base = "bundle:\n  name: b\ntargets:\n#  dev:\n#    default: true\n"
    bundle = load_bundle(a_bundle(tmp_path, pipeline_yml("name: p\n"), base=base))
    assert (bundle.target, sorted(bundle.pipelines)) == ("default", ["p"])


def test_paths_written_from_workspace_file_path_are_the_bundle_s_own_files(tmp_path):
    """`${workspace.file_path}` is where the CLI syncs the bundle's folder, so a path built on it
    names a file of the bundle: locally, that file where it is."""
    root = a_bundle(tmp_path, pipeline_yml("""
        name: p
        root_path: ${workspace.file_path}/src
        libraries:
          - file:
              path: ${workspace.file_path}/src/a.py
          - glob:
              include: ${workspace.file_path}/src/*.sql
    """))
    p = load_bundle(root).pipeline()
    assert p.root_path == tmp_path / "src"
    assert [str(library) for library in p.libraries] == [f"{tmp_path}/src/a.py",
                                                         f"{tmp_path}/src/b.sql"]


def test_workspace_file_path_is_the_sync_root_when_sync_paths_reach_above_the_bundle(tmp_path):
    """As in Databricks' contrib monitoring bundles: `sync.paths` lists `../common`, so the CLI
    syncs the folder holding both, and `${workspace.file_path}` is that folder."""
    bundle = tmp_path / "this_dab"
    base = BASE + "sync:\n  paths:\n    - ../common\n    - .\n"
    a_bundle(bundle, pipeline_yml("""
        name: p
        root_path: ${workspace.file_path}/this_dab/src
        libraries:
          - glob:
              include: ../../common/*.py
        configuration:
          files: ${workspace.file_path}
    """), base=base)
    write(tmp_path, {"common/shared.py": "y = 2\n"})
    p = load_bundle(bundle).pipeline()
    assert (p.root_path, p.configuration["files"]) == (bundle / "src", str(tmp_path))
    assert [str(library) for library in p.libraries] == [f"{tmp_path}/common/shared.py"]
    # A workspace path that is no file of the bundle stays refused.
    outside = a_bundle(tmp_path / "other", pipeline_yml("""
        name: p
        libraries:
          - file:
              path: /Workspace/Shared/a.py
    """))
    assert "`/Workspace/Shared/a.py` is a workspace path" in refused(outside)
