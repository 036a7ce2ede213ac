"""A Databricks Asset Bundle read as the Databricks CLI reads it (src/exactly_once/bundle/): the
bundles under tests/bundles/, and the CLI's rules one by one. Pure Python, as are the bad bundles
(test_bundle_errors.py), notebooks (test_bundle_notebooks.py) and resources written in Python
(test_bundle_python_resources.py).

The expected values of the four test bundles are what the Databricks CLI (v0.298.0, `bundle
validate -o json` against a stub workspace whose user is ci@example.com) gave for them.
"""

from __future__ import annotations

import pytest
from bundle_files import (
    BASE,
    BUNDLES,
    USER,
    a_bundle,
    pipeline_yml,
    refused,
    the_user,  # noqa: F401 - autouse: every test runs as the same workspace user
    write,
)

from exactly_once.bundle import load_bundle
from exactly_once.bundle.current_user import domain_friendly_name, short_name
from exactly_once.errors import BundleError


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
