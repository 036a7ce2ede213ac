"""Expectations in the local runtime: warn keeps and counts, drop removes and counts, fail stops the
flow naming the expectation, dataset and a failing record, and leaves the target unchanged."""

from __future__ import annotations

import json
import textwrap

import pytest
from pyspark.sql import functions as F
from silver_frames import checked_events

from exactly_once.errors import FlowError
from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.graph import expectations as ex
from exactly_once.transforms.silver import VALUE_DIGEST, parse_events

ROWS = [{"id": 1, "v": 5}, {"id": 2, "v": -1}, {"id": None, "v": 3}, {"id": 4, "v": None}]


def test_decorators_record_expectations_in_declaration_order():
    @ex.expect("a", "x > 0")
    @ex.expect_all_or_drop({"b": "y IS NOT NULL", "c": "z = 1"})
    @ex.expect_or_fail("d", "true")
    def query():
        return None

    assert [(e.name, e.action) for e in ex.declared(query)] == [
        ("a", "warn"), ("b", "drop"), ("c", "drop"), ("d", "fail")]

    # By the names Databricks' expectations page gives the arguments.
    @ex.expect(description="e", constraint="x > 1")
    @ex.expect_or_drop(description="f", constraint="x > 2")
    @ex.expect_or_fail(description="g", constraint="x > 3")
    def named():
        return None

    assert [(e.name, e.constraint, e.action) for e in ex.declared(named)] == [
        ("e", "x > 1", "warn"), ("f", "x > 2", "drop"), ("g", "x > 3", "fail")]
    with pytest.raises(ex.ExpectationError, match="below @dp.table"):
        ex.expect("a", "true")(None)


def _pipeline(tmp_path, body: str):
    data = tmp_path / "input"
    data.mkdir(exist_ok=True)
    (data / "rows.json").write_text("\n".join(json.dumps(r) for r in ROWS))
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir(exist_ok=True)
    header = f"""
        from pyspark import pipelines as dp
        SOURCE = {str(data)!r}
    """
    (pipelines / "p.py").write_text(textwrap.dedent(header) + textwrap.dedent(body))
    return pipelines


def test_warn_keeps_drop_removes_and_both_are_counted(spark, settings, tmp_path):
    pipelines = _pipeline(tmp_path, """
        @dp.table(name="checked")
        @dp.expect("positive_v", "v > 0")
        @dp.expect_or_drop("has_id", "id IS NOT NULL")
        def checked():
            return spark.readStream.schema("id BIGINT, v BIGINT").json(SOURCE)

        @dp.materialized_view(name="summary")
        @dp.expect_all({"small": "n < 3"})
        def summary():
            return spark.read.table("checked").groupBy().count().withColumnRenamed("count", "n")
    """)
    warehouse = tmp_path / "wh"
    result = run_pipeline(spark, settings, warehouse, pipelines_dir=pipelines)
    by_flow = {f.flow: f for f in result.flows}
    checked = by_flow["checked"]
    metrics = {m.name: (m.passed_records, m.failed_records) for m in checked.expectations}
    # NULL v counts as failing `positive_v`; warn keeps those rows, drop removes the NULL id.
    assert metrics == {"positive_v": (2, 2), "has_id": (3, 1)}
    assert checked.dropped_records == 1 and checked.output_rows == 3
    ids = {r.id for r in spark.read.format("delta").load(str(warehouse / "checked")).collect()}
    assert ids == {1, 2, 4}
    summary = by_flow["summary"]
    assert [(m.name, m.dataset, m.passed_records, m.failed_records)
            for m in summary.expectations] == [("small", "summary", 0, 1)]
    assert summary.dropped_records == 0 and summary.output_rows == 1


def test_a_constraint_counts_as_its_own_sql_says(spark):
    """The runtime writes each constraint into SQL of its own (expectations.py): a `--` comment
    ends with the constraint's line, an OR binds inside it, and NULL fails, as on Databricks."""
    df = spark.createDataFrame([(1, 5), (2, -1), (None, 3), (4, None)], "id BIGINT, v BIGINT")
    checked, observed = ex.apply_expectations(df, [
        ex.Expectation("positive", "v > 0 -- what a price is", ex.WARN),
        ex.Expectation("known", "id IS NOT NULL OR v < 0", ex.DROP)], "d")
    assert sorted(tuple(r) for r in checked.collect()) == [(1, 5), (2, -1), (4, None)]
    observed.collect()
    assert [(m.name, m.passed_records, m.failed_records) for m in observed.metrics] == [
        ("positive", 2, 2), ("known", 3, 1)]
    assert observed.dropped_records == 1


@pytest.mark.parametrize("kind", ["streaming", "batch"])
def test_fail_stops_the_flow_and_leaves_the_target_unchanged(spark, settings, tmp_path, kind):
    from delta.tables import DeltaTable

    read = 'spark.readStream.schema("id BIGINT, v BIGINT").json(SOURCE)' if kind == "streaming" \
        else 'spark.read.schema("id BIGINT, v BIGINT").json(SOURCE)'
    decorator = "dp.table" if kind == "streaming" else "dp.materialized_view"
    warehouse = tmp_path / "wh"
    ok = _pipeline(tmp_path, f"""
        @{decorator}(name="target")
        def target():
            return {read}.where("v > 0")
    """)
    run_pipeline(spark, settings, warehouse, pipelines_dir=ok)
    path = str(warehouse / "target")
    version = DeltaTable.forPath(spark, path).history(1).first().version
    (tmp_path / "input" / "more.json").write_text(json.dumps({"id": 9, "v": -7}))
    failing = _pipeline(tmp_path, f"""
        @{decorator}(name="target")
        @dp.expect_or_fail("positive_v", "v > 0")
        def target():
            return {read}
    """)
    with pytest.raises(FlowError) as err:
        run_pipeline(spark, settings, warehouse, pipelines_dir=failing)
    message = str(err.value)
    assert "expectation `positive_v`" in message and "dataset `target`" in message
    assert '"v":-' in message  # a sample failing record
    assert DeltaTable.forPath(spark, path).history(1).first().version == version
    assert spark.read.format("delta").load(path).count() == 2  # v = 5 and v = 3, as before


def test_silver_rules_are_measured_where_they_drop(spark, quality_run):
    """Rule failures counted on the checked views = quarantined well-formed records per rule."""
    wh = quality_run.warehouse
    quarantine = spark.read.format("delta").load(str(wh / "quarantine"))
    flows = {f.flow: f for f in quality_run.result.flows}
    for topic_name, flow in [("orders", "silver_orders"),
                             ("player_rewards", "silver_player_rewards")]:
        topic = quality_run.settings.topic(topic_name)
        rules = list(topic.rules)
        metrics = {m.name: m for m in flows[flow].expectations}
        assert list(metrics) == rules
        assert {m.dataset for m in metrics.values()} == {f"checked_{topic_name}"}
        well_formed = quarantine.where(F.col("source_topic") == topic_name).where(
            F.size(F.array_except("errors", F.array(*map(F.lit, rules)))) == 0)
        assert flows[flow].dropped_records == well_formed.count() > 0
        for rule in rules:
            expected = well_formed.where(F.array_contains("errors", rule)).count()
            assert metrics[rule].failed_records == expected, rule


def test_silver_contents_are_what_the_rules_allow(spark, quality_run):
    """The expectation-based silver holds exactly the events the parse + rules let through."""
    wh = quality_run.warehouse
    bronze = spark.read.format("delta").load(str(wh / "bronze_kafka_events"))
    for topic_name, table in [("orders", "silver_orders"),
                              ("player_rewards", "silver_player_rewards")]:
        topic = quality_run.settings.topic(topic_name)
        valid = checked_events(parse_events(bronze, topic), topic) \
            .drop(VALUE_DIGEST, "kafka_key", "errors")
        silver = spark.read.format("delta").load(str(wh / table))
        assert silver.select(*valid.columns).subtract(valid).count() == 0
        assert silver.select("event_id").distinct().count() == \
            valid.select("event_id").distinct().count()
