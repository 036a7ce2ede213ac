"""Great Expectations suites from conf/, validated on the warehouse tables, with Data Docs."""

from __future__ import annotations

import shutil

from pyspark.sql import functions as F

from exactly_once import cli
from exactly_once.quality.gx_suites import applicable_rules, build_suite
from exactly_once.settings.quality import load_quality


def test_suites_come_from_conf(spark, quality_run):
    import great_expectations as gx

    gx.get_context(mode="ephemeral")  # GX 1.x builds suites inside an active context
    quality = load_quality()
    assert set(quality) == {"silver_orders", "silver_player_rewards", "orders", "player_xp"}
    silver = spark.read.format("delta").load(str(quality_run.warehouse / "silver_orders"))
    rules = quality_run.settings.topic("orders").rules
    usable = applicable_rules(rules, silver)
    # Rules reading `kafka_key` cannot run on silver (it has no such column); the rest do.
    assert set(usable) == {n for n, sql in rules.items() if "kafka_key" not in sql}
    suite = build_suite(quality["silver_orders"], quality_run.settings, silver)
    assert {e.meta.get("rule") for e in suite.expectations if e.meta} >= set(usable)
    orders = {e.expectation_type for e in build_suite(quality["orders"]).expectations}
    assert {"expect_column_values_to_be_unique", "expect_column_values_to_be_in_set",
            "expect_table_row_count_to_be_between"} <= orders


def test_pipeline_output_passes_and_data_docs_are_built(validated):
    report, data_docs = validated
    assert report.success, report.summary()
    assert [o.table for o in report.outcomes] == \
        ["silver_orders", "silver_player_rewards", "orders", "player_xp"]
    assert all(o.evaluated >= 4 for o in report.outcomes)
    assert (data_docs / "index.html").is_file()
    for suite in ("silver_orders", "silver_player_rewards", "orders", "player_xp"):
        assert list((data_docs / "validations" / suite).rglob("*.html")), suite


def test_a_broken_rule_fails_validation_with_a_non_zero_exit(spark, in_session, quality_run,
                                                              tmp_path, capsys):
    broken = tmp_path / "warehouse"
    shutil.copytree(quality_run.warehouse, broken)
    # A gold row that repeats a player with negative XP; a silver event of an unknown type.
    xp = spark.read.format("delta").load(str(broken / "player_xp"))
    xp.limit(1).withColumn("total_xp", F.lit(-5).cast("bigint")) \
        .write.format("delta").mode("append").save(str(broken / "player_xp"))
    silver = spark.read.format("delta").load(str(broken / "silver_orders"))
    silver.limit(1).withColumn("event_type", F.lit("order_exploded")) \
        .write.format("delta").mode("append").save(str(broken / "silver_orders"))

    # The command as users run it, in this process's Spark session (as tests/test_timeline.py
    # runs `run`): its exit code and output are the command's, not the process's.
    code = cli.main(["quality", "validate", "--warehouse", str(broken),
                     "--data-docs", str(tmp_path / "docs")])
    out, err = capsys.readouterr()
    assert code == 2, out + err[-3000:]
    assert "✗ player_xp" in out and "✗ silver_orders" in out and "✓ orders" in out
    assert "expect_column_values_to_be_unique (player_id)" in out
    assert "expect_column_values_to_be_between (total_xp)" in out
    assert "rule `known_event_type`" in out  # the conf rule, checked by GX too
    assert (tmp_path / "docs" / "index.html").is_file()


def test_missing_warehouse_is_one_line_error(tmp_path, capsys):
    code = cli.main(["quality", "validate", "--warehouse", str(tmp_path / "nope")])
    assert code == 1
    assert capsys.readouterr().err.startswith("exactly-once: error: no warehouse at")
