"""Any bundle's pipelines, locally (issue "Your bundle, locally"): `exactly-once` run in a
bundle's folder runs that bundle, its tables are published as catalog.schema.name in the local
catalog, the tables it reads from outside come from its `fixtures/`, and a bad bundle is one
line naming the file and the key.

The bundles are tests/bundles/*, written in the shape of Databricks' templates (their own
files, not copies); each test runs a copy in tmp_path through `cli.main` as a user runs it, in
the test session's Spark (no JVM per command), but one: another process reads what a run
published.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from test_cli_errors import covers

from exactly_once import cli
from exactly_once.errors import BundleError, CatalogError, FixtureError, MissingTableError

BUNDLES = Path(__file__).parent / "bundles"
ERROR = "exactly-once: error: "
USER = "tester@example.com"  # its short_name is `tester`


@pytest.fixture
def bundle(tmp_path, monkeypatch):
    """A copy of a test bundle, the current folder, the local user `tester`."""
    monkeypatch.setenv("EXACTLY_ONCE_USER_NAME", USER)

    def copy(name: str) -> Path:
        root = tmp_path / name
        shutil.copytree(BUNDLES / name, root)
        monkeypatch.chdir(root)
        return root
    return copy


def exactly_once(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def shown_json(capsys, *argv: str) -> list[dict]:
    code, out, err = exactly_once(capsys, "show", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def trips(root: Path) -> list[dict]:
    return json.loads((root / "fixtures" / "samples.nyctaxi.trips.json").read_text())


def one_pipeline(root: Path, schema: str, library: str, sources: dict[str, str]) -> Path:
    """A bundle in `root` (its folder's name) of one pipeline publishing to main.`schema`, its
    one `library` entry over `sources` written under src/."""
    (root / "src").mkdir(parents=True)
    (root / "databricks.yml").write_text(
        f"bundle: {{name: {root.name}}}\n"
        f"resources:\n  pipelines:\n    {root.name}:\n      name: {root.name}\n"
        f"      catalog: main\n      schema: {schema}\n      libraries:\n        {library}\n")
    for name, text in sources.items():
        (root / "src" / name).write_text(text)
    return root


def checked_and_run(capsys, monkeypatch, root: Path, datasets: int) -> None:
    """`root`'s bundle over the taxi fixtures, the current folder: dry-run finds `datasets`
    datasets and flows and no problems, then a run succeeds."""
    shutil.copytree(BUNDLES / "python_template_like" / "fixtures", root / "fixtures")
    monkeypatch.chdir(root)
    code, out, err = exactly_once(capsys, "dry-run")
    assert code == 0, err
    assert f"{datasets} datasets, {datasets} flows; no problems" in out
    assert exactly_once(capsys, "run", "--quiet")[0] == 0, capsys.readouterr()


def one_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), err
    return lines[0].removeprefix(ERROR)


# -- a bundle of Databricks' Python template's shape ----------------------------------------------
def test_the_bundle_in_the_current_folder_runs_and_publishes_its_tables(in_session, bundle,
                                                                        capsys):
    root = bundle("python_template_like")
    code, out, err = exactly_once(capsys, "dry-run")
    assert code == 0, err
    assert "dry run: 2 pipeline files, 2 datasets, 2 flows; no problems" in out
    assert "publishes to dev_catalog.tester (target dev)" in out
    assert "src/taxi_etl/transformations/taxi_trips.py" in out and "pipelines/" not in out
    # What a workspace gives the pipeline is shown as such, never silently dropped.
    assert "  pipeline taxi_etl: serverless: True" in out
    assert "  bundle: workspace: {'host': 'https://example.cloud.databricks.com'}" in out

    code, out, progress = exactly_once(capsys, "run")
    assert code == 0, progress
    assert (root / ".local" / "warehouse" / "fares_by_zip" / "_delta_log").is_dir()

    expected: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
    for trip in trips(root):
        if trip["trip_distance"] > 0:
            expected[trip["pickup_zip"]][0] += trip["fare_amount"]
            expected[trip["pickup_zip"]][1] += 1
    # A materialized view's refresh counts what it writes; its batch reads are not counted,
    # so no "0 rows in" is printed for them.
    assert f"✓ fares_by_zip: {len(expected)} rows written (" in progress, progress
    rows = {(r["pickup_zip"], r["total_fare"], r["trips"])
            for r in shown_json(capsys, "fares_by_zip")}
    assert rows == {(z, fare, n) for z, (fare, n) in expected.items()}
    # Any name the pipeline's code could use names the same table.
    for name in ("tester.fares_by_zip", "dev_catalog.tester.fares_by_zip",
                 "`dev_catalog`.tester.`fares_by_zip`"):
        assert {(r["pickup_zip"], r["total_fare"], r["trips"])
                for r in shown_json(capsys, name)} == rows
    # The published names are Spark's too: SQL, the catalog API.
    assert {r.pickup_zip for r in in_session.sql(
        "SELECT pickup_zip FROM dev_catalog.tester.fares_by_zip").collect()} == set(expected)
    assert {t.name for t in in_session.catalog.listTables("dev_catalog.tester")} == \
        {"fares_by_zip", "taxi_trips"}


def test_show_prints_every_row_as_csv_and_a_catalog_table_by_its_name(in_session, bundle,
                                                                      capsys):
    root = bundle("python_template_like")
    assert exactly_once(capsys, "run", "--quiet")[0] == 0
    code, out, err = exactly_once(capsys, "show", "samples.nyctaxi.trips", "--format", "csv")
    assert code == 0, err
    read = list(csv.DictReader(io.StringIO(out)))
    assert [(float(r["fare_amount"]), int(r["pickup_zip"])) for r in read] == \
        [(t["fare_amount"], t["pickup_zip"]) for t in trips(root)]
    assert list(read[0]) == list(trips(root)[0])  # the fixture's columns, in its order
    code, out, err = exactly_once(capsys, "show", "no_such_table")
    assert code == 1
    assert one_error(err).startswith(
        f"no table `no_such_table` in {root / '.local' / 'warehouse'} or the local catalog "
        f"({root / '.local' / 'catalog'}); its tables are event_log, fares_by_zip, taxi_trips; "
        f"the catalog's are dev_catalog.tester.fares_by_zip, dev_catalog.tester.taxi_trips, "
        f"samples.nyctaxi.trips")


def test_a_changed_fixture_is_what_the_next_update_reads(in_session, bundle, capsys):
    root = bundle("python_template_like")
    assert exactly_once(capsys, "run", "--quiet")[0] == 0
    fixture = root / "fixtures" / "samples.nyctaxi.trips.json"
    changed = [{**t, "fare_amount": 100.0} for t in trips(root)[:2]]
    fixture.write_text(json.dumps(changed))
    assert exactly_once(capsys, "run", "--quiet")[0] == 0
    assert {(r["pickup_zip"], r["total_fare"]) for r in shown_json(capsys, "fares_by_zip")} == \
        {(t["pickup_zip"], 100.0) for t in changed}


# -- SQL, a schema resource, a notebook -----------------------------------------------------------
def test_a_sql_bundle_with_a_schema_resource_and_a_notebook(in_session, bundle, capsys):
    root = bundle("sql_template_like")
    code, out, err = exactly_once(capsys, "run", "--quiet")
    assert code == 0, err
    short = [t for t in trips(root) if t["trip_distance"] < 5]
    counts: dict[int, int] = defaultdict(int)
    for t in short:
        counts[t["pickup_zip"]] += 1
    # Development mode prefixes the bundle's schema (dev_<short_name>_), as the CLI deploys it.
    report = shown_json(capsys, "main.dev_tester_taxi_reports.zip_report")
    assert {(r["pickup_zip"], r["trips"]) for r in report} == set(counts.items())
    busiest = max(sorted(counts), key=lambda z: counts[z])
    assert shown_json(capsys, "busiest_zip") == [{"pickup_zip": busiest,
                                                  "trips": counts[busiest]}]


# -- several pipelines ----------------------------------------------------------------------------
def test_one_pipeline_reads_what_another_publishes(in_session, bundle, capsys):
    root = bundle("multi_pipeline")
    code, _, err = exactly_once(capsys, "run")
    assert code == 1
    assert one_error(err) == (
        "databricks.yml: resources.pipelines: the bundle has several pipelines; name one of "
        "ingest, report")
    code, _, err = exactly_once(capsys, "run", "nope")
    assert (code, one_error(err)) == (1, "databricks.yml: resources.pipelines: no pipeline "
                                         "`nope`; the bundle's pipelines: ingest, report")
    assert exactly_once(capsys, "run", "ingest", "--quiet")[0] == 0
    assert exactly_once(capsys, "run", "report", "--quiet")[0] == 0
    # Each pipeline keeps its own storage; the catalog is the bundle's.
    assert (root / ".local" / "warehouse" / "report" / "busy_zips" / "_delta_log").is_dir()
    counts: dict[int, int] = defaultdict(int)
    for t in trips(root):
        counts[t["pickup_zip"]] += 1
    assert {(r["pickup_zip"], r["trips"])
            for r in shown_json(capsys, "busy_zips", "--pipeline", "report")} == \
        set(counts.items())
    # A variable given on the command line, as `databricks bundle run --var`.
    assert exactly_once(capsys, "--var", "report_settings={}", "run", "report")[0] == 1


# -- the event log, published ----------------------------------------------------------------------
def test_the_event_log_is_published_under_the_name_event_log_gives(in_session, bundle, capsys):
    """A pipeline's `event_log` publishes the event log as a table under its `name`, in its
    `catalog` and `schema` when given, else the pipeline's
    (https://docs.databricks.com/aws/en/ldp/monitor-event-logs, publishing the event log)."""
    root = bundle("python_template_like")
    resource = root / "resources" / "taxi_etl.pipeline.yml"
    text = resource.read_text()
    resource.write_text(text.replace("      serverless: true\n",
                                     "      serverless: true\n      event_log:\n"
                                     "        name: taxi_events\n"))
    code, out, err = exactly_once(capsys, "dry-run")
    assert code == 0, err
    assert "taxi_etl: event_log" not in out  # applied locally, so not among what is not
    assert exactly_once(capsys, "run", "--quiet")[0] == 0
    flows = {r.flow for r in in_session.sql(
        "SELECT origin.flow_name AS flow FROM dev_catalog.tester.taxi_events "
        "WHERE event_type = 'flow_progress'").collect()}
    assert flows == {"taxi_trips", "fares_by_zip"}
    assert "taxi_events" in {t.name for t in in_session.catalog.listTables("dev_catalog.tester")}

    resource.write_text(text.replace("      serverless: true\n",
                                     "      serverless: true\n      event_log:\n"
                                     "        name: events\n        catalog: ops\n"
                                     "        schema: logs\n"))
    assert exactly_once(capsys, "run", "--quiet")[0] == 0
    updates = in_session.sql("SELECT DISTINCT origin.update_id FROM ops.logs.events").count()
    assert updates == 2  # the same event log, both updates'

    resource.write_text(text.replace("      serverless: true\n",
                                     "      serverless: true\n      event_log:\n"
                                     "        name: fares_by_zip\n"))
    clash = ("event_log: dev_catalog.tester.fares_by_zip is the pipeline's dataset "
             "`fares_by_zip`; give the event log a name of its own")
    code, _, err = exactly_once(capsys, "run", "--quiet")
    assert (code, one_error(err)) == (1, clash)
    code, _, err = exactly_once(capsys, "dry-run")
    assert code == 1 and f"{ERROR}{clash}" in err.splitlines(), err

    resource.write_text(text.replace("      serverless: true\n",
                                     "      serverless: true\n      event_log:\n"
                                     "        table: events\n"))
    code, _, err = exactly_once(capsys, "dry-run")
    assert (code, one_error(err)) == (1, "resources/taxi_etl.pipeline.yml:10: "
                                         "resources.pipelines.taxi_etl.event_log: no setting "
                                         "`table` (an event log has `name`, `catalog` and "
                                         "`schema`)")


# -- root_path and configuration ------------------------------------------------------------------
def test_root_path_imports_and_the_configuration(in_session, bundle, capsys):
    """fares.py imports fare_rules from the pipeline's root_path and reads fares.min_fare and
    fares.currency with spark.conf.get: the dev target's min_fare is 3."""
    root = bundle("root_path_and_configuration")
    code, _, err = exactly_once(capsys, "run", "--quiet")
    assert code == 0, err
    rows = shown_json(capsys, "fares")
    assert sorted(r["fare_amount"] for r in rows) == \
        sorted(t["fare_amount"] for t in trips(root) if t["fare_amount"] >= 3)
    assert all(r["fare_with_tip"] == round(r["fare_amount"] * 1.2, 2) and r["currency"] == "USD"
               for r in rows)
    # --var and --conf, as on `databricks bundle run`; the table in the dev schema of its name.
    code, _, err = exactly_once(capsys, "--var", "currency=EUR", "run", "--quiet",
                                "--conf", "fares.min_fare=15")
    assert code == 0, err
    rows = shown_json(capsys, "main.fares_dev.fares")
    assert {(r["fare_amount"], r["currency"]) for r in rows} == \
        {(t["fare_amount"], "EUR") for t in trips(root) if t["fare_amount"] >= 15}


# -- a bad bundle: one line, naming the file and the key ------------------------------------------
@covers(BundleError)
def test_a_missing_databricks_yml(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATABRICKS_BUNDLE_ROOT", raising=False)
    code, _, err = exactly_once(capsys, "dry-run")
    assert code == 1
    assert one_error(err).startswith(f"no databricks.yml in {tmp_path} or any folder above it")


def test_an_unresolved_variable_and_a_glob_matching_nothing(bundle, capsys):
    root = bundle("python_template_like")
    pipeline_yml = root / "resources" / "taxi_etl.pipeline.yml"
    text = pipeline_yml.read_text()
    pipeline_yml.write_text(text.replace("${var.schema}", "${var.shcema}"))
    code, _, err = exactly_once(capsys, "dry-run")
    assert code == 1
    line = one_error(err)
    assert line.startswith("resources/taxi_etl.pipeline.yml:") and "var.shcema" in line \
        and "resources.pipelines.taxi_etl.schema" in line, line
    pipeline_yml.write_text(text.replace("transformations/**", "transformation/**"))
    code, _, err = exactly_once(capsys, "run")
    line = one_error(err)
    assert code == 1 and line.startswith("resources/taxi_etl.pipeline.yml:") \
        and "taxi_etl" in line and "transformation/**" in line, line


@covers(MissingTableError)
def test_a_table_nothing_supplies_is_one_line_saying_how_to_supply_it(in_session, bundle,
                                                                      capsys):
    root = bundle("python_template_like")
    (root / "fixtures" / "samples.nyctaxi.trips.json").unlink()
    expected = (f"src/taxi_etl/transformations/taxi_trips.py: dataset `taxi_trips`: reads table "
                f"`samples.nyctaxi.trips`, which the pipeline does not define (its datasets: "
                f"fares_by_zip, taxi_trips) and the local catalog does not hold: supply it as "
                f"{root / 'fixtures' / 'samples.nyctaxi.trips'}.json (an array of row objects), "
                f".csv (with a header) or .parquet")
    code, out, err = exactly_once(capsys, "dry-run")
    assert (code, err.splitlines()) == (1, [ERROR + expected])
    code, out, err = exactly_once(capsys, "run", "--quiet")
    assert (code, one_error(err)) == (1, expected)


@covers(FixtureError)
def test_a_fixture_that_is_not_rows(in_session, bundle, capsys):
    root = bundle("python_template_like")
    fixture = root / "fixtures" / "samples.nyctaxi.trips.json"
    fixture.write_text('{"trip_distance": 1}')
    code, _, err = exactly_once(capsys, "run", "--quiet")
    assert (code, one_error(err)) == (1, f"{fixture}: a JSON fixture is an array of row "
                                         f'objects, e.g. [{{"id": 1, "name": "a"}}]')


@covers(CatalogError)
def test_a_dataset_cannot_be_published_over_a_table_the_catalog_holds(in_session, bundle,
                                                                      capsys):
    root = bundle("python_template_like")
    shutil.copy(root / "fixtures" / "samples.nyctaxi.trips.json",
                root / "fixtures" / "dev_catalog.tester.taxi_trips.json")
    code, _, err = exactly_once(capsys, "run", "--quiet")
    assert code == 1
    assert one_error(err) == (
        f"{root / 'fixtures' / 'dev_catalog.tester.taxi_trips.json'} supplies "
        f"dev_catalog.tester.taxi_trips, which the pipeline publishes as its dataset "
        f"`taxi_trips`: rename the fixture or the dataset")


# -- visible from every process -------------------------------------------------------------------
def test_another_process_reads_what_a_run_published(in_session, bundle, capsys):
    root = bundle("python_template_like")
    assert exactly_once(capsys, "run", "--quiet")[0] == 0
    env = {**os.environ, "EXACTLY_ONCE_ENGINE": "off", "EXACTLY_ONCE_USER_NAME": USER}
    done = subprocess.run([sys.executable, "-m", "exactly_once.cli", "show",
                           "dev_catalog.tester.taxi_trips", "--format", "json"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == sum(1 for t in trips(root) if t["trip_distance"] > 0)


# -- /Volumes paths -------------------------------------------------------------------------------
LANDING = """\
from pyspark import pipelines as dp


@dp.table
def events():
    return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
            .option("cloudFiles.inferColumnTypes", "true")
            .load("/Volumes/main/raw/landing/events"))
"""


def test_a_volume_path_is_a_directory_of_the_local_catalog(in_session, tmp_path, monkeypatch,
                                                           capsys):
    """Auto Loader over `/Volumes/<catalog>/<schema>/<volume>/...`: the files of
    `.local/catalog/_volumes/<catalog>/<schema>/<volume>/...`, each read once."""
    root = one_pipeline(tmp_path / "landing", "raw", "- file: {path: src/events.py}",
                        {"events.py": LANDING})
    volume = root / ".local" / "catalog" / "_volumes" / "main" / "raw" / "landing" / "events"
    volume.mkdir(parents=True)
    (volume / "a.json").write_text('{"id": 1}\n{"id": 2}\n')
    monkeypatch.chdir(root)
    assert exactly_once(capsys, "run", "--quiet")[0] == 0, capsys.readouterr()
    (volume / "b.json").write_text('{"id": 3}\n')
    assert exactly_once(capsys, "run", "--quiet")[0] == 0, capsys.readouterr()
    assert sorted(r["id"] for r in shown_json(capsys, "main.raw.events")) == [1, 2, 3]


# -- dataset names of two or three parts ----------------------------------------------------------
QUALIFIED = """
from pyspark import pipelines as dp


@dp.materialized_view(name="main.analytics.trips")
def trips():
    return spark.read.table("samples.nyctaxi.trips")


dp.create_streaming_table("analytics.changes")


@dp.append_flow(target="main.analytics.changes")
def feed():
    return spark.readStream.table("samples.nyctaxi.trips").select(
        "pickup_zip", "fare_amount", "tpep_pickup_datetime")


dp.create_streaming_table("main.analytics.latest_fare")
dp.create_auto_cdc_flow(target="main.analytics.latest_fare", source="analytics.changes",
                        keys=["pickup_zip"], sequence_by="tpep_pickup_datetime")
"""
QUALIFIED_SQL = """
CREATE OR REFRESH MATERIALIZED VIEW main.analytics.fares AS
SELECT pickup_zip, sum(fare_amount) AS total_fare FROM main.analytics.trips GROUP BY pickup_zip;
"""


def test_a_dataset_named_in_the_pipeline_s_catalog_and_schema_is_its_own(in_session, tmp_path,
                                                                         monkeypatch, capsys):
    """Databricks reads a dataset's name of two or three parts against the pipeline's catalog
    and schema (https://docs.databricks.com/aws/en/ldp/target-schema), in Python and SQL, for
    a dataset, a flow's target and an AUTO CDC flow's source: the pipeline's own names are its
    datasets."""
    root = one_pipeline(tmp_path / "qualified", "analytics", "- glob: {include: src/*}",
                        {"trips.py": QUALIFIED, "fares.sql": QUALIFIED_SQL})
    checked_and_run(capsys, monkeypatch, root, datasets=4)
    fares: dict[int, float] = defaultdict(float)
    latest: dict[int, tuple[str, float]] = {}
    for trip in trips(root):
        fares[trip["pickup_zip"]] += trip["fare_amount"]
        seen = latest.get(trip["pickup_zip"])
        if seen is None or trip["tpep_pickup_datetime"] > seen[0]:
            latest[trip["pickup_zip"]] = (trip["tpep_pickup_datetime"], trip["fare_amount"])
    assert {r["pickup_zip"]: r["total_fare"] for r in shown_json(capsys, "fares")} == \
        pytest.approx(dict(fares))
    assert {r["pickup_zip"]: r["fare_amount"]
            for r in shown_json(capsys, "main.analytics.latest_fare")} == \
        {zip_code: fare for zip_code, (_, fare) in latest.items()}



MEDALLION = """
from pyspark import pipelines as dp


@dp.table(name="bronze.trips")
def bronze_trips():
    return spark.readStream.table("samples.nyctaxi.trips")


@dp.table(name="silver.trips", comment="trips that went somewhere")
def silver_trips():
    return spark.readStream.table("main.bronze.trips").where("trip_distance > 0")


dp.create_streaming_table("Silver.latest_fare")
dp.create_auto_cdc_flow(target="silver.latest_fare", source="silver.trips",
                        keys=["pickup_zip"], sequence_by="tpep_pickup_datetime")
"""
MEDALLION_SQL = """
CREATE OR REFRESH MATERIALIZED VIEW reports.gold.fares AS
SELECT pickup_zip, sum(fare_amount) AS total_fare FROM silver.trips GROUP BY pickup_zip;

CREATE OR REFRESH MATERIALIZED VIEW trips AS SELECT count(*) AS n FROM bronze.trips;

CREATE VIEW gold.long_trips AS SELECT * FROM silver.trips WHERE trip_distance > 2;
"""
# USE: the file's current catalog and schema for the statements after it.
MEDALLION_USE_SQL = """
USE CATALOG reports;
USE SCHEMA gold;
CREATE OR REFRESH MATERIALIZED VIEW zip_count AS SELECT count(*) AS zips FROM fares;

USE main.silver;
CREATE TEMPORARY VIEW far AS SELECT * FROM trips WHERE trip_distance > 2;
CREATE OR REFRESH MATERIALIZED VIEW far_count AS
SELECT count(*) AS n, (SELECT count(*) FROM analytics.trips) AS counts FROM far;
"""


def test_a_pipeline_publishes_datasets_to_other_schemas_and_catalogs(in_session, tmp_path,
                                                                     monkeypatch, capsys):
    """In Databricks' default publishing mode a dataset named in another schema or catalog than
    the pipeline's is published there, its schema made if need be
    (https://docs.databricks.com/aws/en/ldp/target-schema): one pipeline's bronze, silver and
    gold schemas, two datasets of one last name in two schemas, a dataset of another catalog,
    each read by the others in Python and SQL by any of its names; in SQL also after USE
    CATALOG and USE SCHEMA, which set a file's current catalog and schema."""
    root = one_pipeline(tmp_path / "medallion", "analytics", "- glob: {include: src/*}",
                        {"trips.py": MEDALLION, "gold.sql": MEDALLION_SQL,
                         "use.sql": MEDALLION_USE_SQL})
    checked_and_run(capsys, monkeypatch, root, datasets=9)
    rows = trips(root)
    paid = [t for t in rows if t["trip_distance"] > 0]
    assert 0 < len(paid) < len(rows)
    fares: dict[int, float] = defaultdict(float)
    for trip in paid:
        fares[trip["pickup_zip"]] += trip["fare_amount"]
    assert len(shown_json(capsys, "main.bronze.trips")) == len(rows)
    assert len(shown_json(capsys, "silver.trips")) == len(paid)
    assert shown_json(capsys, "trips") == [{"n": len(rows)}]  # the pipeline's own schema's
    assert {r["pickup_zip"]: r["total_fare"] for r in shown_json(capsys, "reports.gold.fares")} \
        == pytest.approx(dict(fares))
    assert {r["pickup_zip"] for r in shown_json(capsys, "main.silver.latest_fare")} == set(fares)
    assert shown_json(capsys, "reports.gold.zip_count") == [{"zips": len(fares)}]
    far = sum(t["trip_distance"] > 2 for t in rows)
    assert shown_json(capsys, "silver.far_count") == [{"n": far, "counts": 1}]

    # Published under each name, for whoever reads the catalog next (a notebook, a test).
    for name, count in (("main.bronze.trips", len(rows)), ("main.silver.trips", len(paid)),
                        ("reports.gold.fares", len(fares)), ("main.analytics.trips", 1),
                        ("silver.trips", len(paid)),  # the session catalog's schema `silver`
                        ("gold.long_trips", sum(t["trip_distance"] > 2 for t in rows))):
        assert in_session.read.table(name).count() == count, name
    assert in_session.sql("DESCRIBE TABLE EXTENDED main.silver.trips").where(
        "col_name = 'Comment'").first()["data_type"] == "trips that went somewhere"

    # A table is selected by any of its names: the pipeline's, or in full.
    code, out, err = exactly_once(capsys, "run", "--refresh", "silver.trips,main.analytics.trips",
                                  "--full-refresh", "MAIN.Silver.latest_fare")
    assert code == 0, err
    assert exactly_once(capsys, "run", "--refresh", "main.gold.trips")[2].splitlines()[-1] == \
        f"{ERROR}unknown table `gold.trips`; the pipeline's tables are reports.gold.fares, " \
        "trips, bronze.trips, silver.trips, silver.latest_fare, reports.gold.zip_count, " \
        "silver.far_count"

    # A view is published in the Spark session's catalog: the pipeline's catalog, not another.
    (root / "src" / "view.sql").write_text(
        "CREATE VIEW reports.gold.big_fares AS SELECT * FROM reports.gold.fares "
        "WHERE total_fare > 10;\n")
    expected = ("src/view.sql:1: dataset `reports.gold.big_fares`: a view published in another "
                "catalog (reports) than the pipeline's (main): the local runtime publishes "
                "views in the Spark session's catalog, which is the pipeline's; name it in main")
    code, out, err = exactly_once(capsys, "dry-run")
    assert code == 1 and one_error(err) == expected, err
