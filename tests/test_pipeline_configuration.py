"""Pipeline configuration, as Databricks' pipeline parameters: the key/value `configuration` of
the bundle's pipeline resource is what `spark.conf.get("mypipeline.startDate")` reads, when the
files load and inside flows. Locally it comes from the same place, `configuration:` in conf/
(a target's file merged over base.yml), with `run --conf KEY=VALUE` and
`run_pipeline(..., configuration={...})` for one update; it is gone from the session once the
update ends. Keys the runtime owns cannot be configured.

Databricks' pages: "Use parameters with pipelines"
(https://docs.databricks.com/aws/en/ldp/parameters) and "Develop pipeline code with Python"
(https://docs.databricks.com/aws/en/ldp/developer/python-dev).
"""

from __future__ import annotations

import shutil
import textwrap

import pytest
import yaml
from spark_probes import calls_into_the_jvm

from exactly_once import cli
from exactly_once.deploy import bundle_resource
from exactly_once.errors import SettingsError
from exactly_once.local.engine import update_settings
from exactly_once.local.execution import pipeline
from exactly_once.paths import PROJECT_ROOT
from exactly_once.settings.pipeline import load_settings

ERROR = "exactly-once: error: "
# Read when the file loads (no default: a missing parameter fails the load) and in the flow.
PARAMETERS = """
    from pyspark import pipelines as dp

    START = spark.conf.get("mypipeline.startDate")

    @dp.materialized_view(name="params")
    def params():
        return spark.createDataFrame(
            [(START, spark.conf.get("mypipeline.startDate"),
              spark.conf.get("mypipeline.region", "none"))],
            "at_load STRING, in_flow STRING, region STRING")
"""


@pytest.fixture
def files(tmp_path):
    root = tmp_path / "pipelines"
    root.mkdir()
    (root / "params.py").write_text(textwrap.dedent(PARAMETERS))
    return root


@pytest.fixture
def conf(tmp_path):
    """conf/ with `configuration:` in base.yml and a local value over it."""
    conf = tmp_path / "conf"
    shutil.copytree(PROJECT_ROOT / "conf", conf)
    base = conf / "base.yml"
    base.write_text(base.read_text().replace(
        "configuration: {}\n",
        "configuration:\n  mypipeline.startDate: 2025-01-01\n  mypipeline.region: eu\n"))
    with (conf / "targets" / "local.yml").open("a") as local:
        local.write("\nconfiguration:\n  mypipeline.startDate: '2026-11-01'\n")
    return conf


def params(spark, warehouse) -> list[tuple]:
    return [tuple(r) for r in spark.read.format("delta").load(str(warehouse / "params"))
            .collect()]


def test_configuration_comes_from_conf_with_the_target_merged_over(conf):
    assert load_settings("local", conf).configuration == {"mypipeline.startDate": "2026-11-01",
                                                          "mypipeline.region": "eu"}
    assert load_settings("dev", conf).configuration == {"mypipeline.startDate": "2025-01-01",
                                                        "mypipeline.region": "eu"}
    assert load_settings("local").configuration == {}  # the project's own pipeline has none


def test_a_run_reads_its_configuration_at_load_and_in_flows_and_leaves_none(spark, conf, files,
                                                                            tmp_path):
    warehouse = tmp_path / "warehouse"
    settings = load_settings("local", conf)
    pipeline.run_pipeline(spark, settings, warehouse, pipelines_dir=files)
    assert params(spark, warehouse) == [("2026-11-01", "2026-11-01", "eu")]
    assert spark.conf.get("mypipeline.startDate", None) is None  # the session is shared
    # For one update, over conf/'s.
    pipeline.run_pipeline(spark, settings, warehouse, pipelines_dir=files,
                          configuration={"mypipeline.startDate": "2027-01-01"})
    assert params(spark, warehouse) == [("2027-01-01", "2027-01-01", "eu")]
    assert spark.conf.get("mypipeline.region", None) is None


@pytest.mark.parametrize("key, message", [
    ("exactly_once.source", "configuration key exactly_once.source: exactly_once.* are the "
     "settings of conf/'s other sections; set them there, or with --set"),
    ("spark.sql.session.timeZone", "configuration key spark.sql.session.timeZone: the local "
     "runtime sets it on its session; it cannot be configured"),
    ("spark.sql.codegen.factoryMode", "configuration key spark.sql.codegen.factoryMode: the local "
     "runtime sets it for each update; it cannot be configured"),
])
def test_a_key_the_runtime_owns_is_refused(spark, settings, files, tmp_path, key, message):
    with pytest.raises(SettingsError) as refused:
        pipeline.run_pipeline(spark, settings, tmp_path / "warehouse", pipelines_dir=files,
                              configuration={"mypipeline.startDate": "x", key: "UTC"})
    assert str(refused.value) == message
    assert not (tmp_path / "warehouse" / "params").exists()
    assert spark.conf.get("mypipeline.startDate", None) is None


def test_checking_a_configuration_asks_the_jvm_once_per_key(spark):
    with calls_into_the_jvm(spark) as calls:
        update_settings.check_configuration(spark, {"mypipeline.startDate": "x",
                                                    "mypipeline.region": "eu"})
    assert len(calls) == 2, calls


def test_conf_refuses_a_key_of_conf_s_settings(conf):
    with (conf / "targets" / "local.yml").open("a") as local:
        local.write("  exactly_once.source: kafka\n")
    with pytest.raises(SettingsError, match="configuration key exactly_once.source: "):
        load_settings("local", conf)


@pytest.mark.parametrize("section, message", [
    ("configuration: [a, b]", "conf: configuration must map keys to values, got ['a', 'b']"),
    ("configuration:\n  a.b: {c: d}", "conf: configuration key a.b: a value is text, a number "
     "or true/false, got {'c': 'd'}"),
    ("configuration:\n  a.b:", "conf: configuration key a.b: a value is text, a number or "
     "true/false, got None"),
])
def test_a_malformed_configuration_is_one_line(conf, section, message):
    with (conf / "targets" / "local.yml").open("a") as local:
        local.write(f"\n{section}\n")
    with pytest.raises(SettingsError) as refused:
        load_settings("local", conf)
    assert str(refused.value) == message


def test_dry_run_and_run_take_conf_for_one_command(in_session, files, tmp_path, capsys,
                                                   monkeypatch):
    assert cli.main(["dry-run", "--pipelines", str(files)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{ERROR}{files / 'params.py'}: SparkNoSuchElementException: [SQL_CONF_NOT_FOUND] The "
        "SQL config \"mypipeline.startDate\" cannot be found. Please verify that the config "
        "exists. SQLSTATE: 42K0I"]
    assert cli.main(["dry-run", "--pipelines", str(files),
                     "--conf", "mypipeline.startDate=2025-02-03"]) == 0
    capsys.readouterr()
    dump = tmp_path / "empty.jsonl"
    dump.write_text("")
    warehouse = tmp_path / "warehouse"
    assert cli.main(["run", "--quiet", "--pipelines", str(files), "--source", f"file:{dump}",
                     "--warehouse", str(warehouse), "--conf", "mypipeline.startDate=2025-02-03",
                     "--conf", "mypipeline.region = us=east"]) == 0
    assert params(in_session, warehouse) == [("2025-02-03", "2025-02-03", "us=east")]


@pytest.mark.parametrize("arguments, message", [
    (["--conf", "mypipeline.startDate"], "argument --conf: expected KEY=VALUE, got "
     "'mypipeline.startDate'"),
    (["--conf", "=x"], "argument --conf: expected KEY=VALUE, got '=x'"),
])
def test_conf_needs_key_and_value(capsys, arguments, message):
    with pytest.raises(SystemExit) as done:
        cli.main(["run", *arguments])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"exactly-once run: error: {message}"


def test_a_key_has_the_characters_databricks_allows(capsys):
    """"Pipeline parameter keys can only contain _ - . or alphanumeric characters"."""
    assert cli.main(["run", "--conf", "my pipeline/start=1"]) == 1
    assert capsys.readouterr().err == (
        f"{ERROR}configuration key 'my pipeline/start': a key has letters, digits and _ - . "
        "only\n")


def test_run_conf_refuses_conf_s_own_settings_before_spark_starts(capsys):
    assert cli.main(["run", "--conf", "exactly_once.kafka.bootstrap_servers=x"]) == 1
    assert capsys.readouterr().err == (
        f"{ERROR}configuration key exactly_once.kafka.bootstrap_servers: exactly_once.* are the "
        "settings of conf/'s other sections; set them there, or with --set\n")


def test_the_bundle_carries_the_configuration(conf, tmp_path):
    """In the generated pipeline resource next to the `exactly_once.*` keys; a value that
    differs between deploy targets is a bundle variable databricks.yml must set per target."""
    configuration = bundle_resource.pipeline_configuration(conf_dir=conf)
    assert configuration["mypipeline.startDate"] == "2025-01-01"
    assert configuration["mypipeline.region"] == "eu"
    assert configuration["exactly_once.source"] == "kafka"
    with (conf / "targets" / "prod.yml").open("a") as prod:
        prod.write("\nconfiguration:\n  mypipeline.startDate: '2024-06-01'\n")
    resource = yaml.safe_load(bundle_resource.render_pipeline_resource(conf))
    configuration = resource["resources"]["pipelines"][bundle_resource.PIPELINE_KEY][
        "configuration"]
    assert configuration["mypipeline.startDate"] == "${var.mypipeline_startdate}"
    assert bundle_resource.target_variables("prod", conf)["mypipeline_startdate"] == "2024-06-01"
    found = bundle_resource.problems(conf_dir=conf, resource=tmp_path / "none.yml")
    assert "databricks.yml: variable mypipeline_startdate is not declared" in found
    assert ("databricks.yml: target prod sets mypipeline_startdate=None, "
            "conf/targets/prod.yml gives '2024-06-01'") in found
