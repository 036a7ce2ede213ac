"""A materialized view whose inputs did not change since its last refresh is not recomputed
(issue 58, execution/unchanged.py): its table keeps its version and the event log says SKIPPED.
A view that reads something outside the pipeline, or whose query changed, or that depends on
the clock, or calls a UDF, or whose refresh policy is `full`, is recomputed every update, and
so is one over a table a full refresh rebuilt."""

from __future__ import annotations

from textwrap import dedent

from exactly_once.local.execution.pipeline import run_pipeline
from exactly_once.local.observe import event_log
from exactly_once.local.storage import delta_log
from exactly_once.local.storage.warehouse import Warehouse

PIPELINE = '''
from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.table(name="events")
def events():
    return spark.readStream.format("delta").load("{source}")


@dp.materialized_view(name="totals")
@dp.expect("positive", "v > 0")
def totals():
    return spark.read.table("events").groupBy("k").agg(F.{aggregate}("v").alias("v"))


@dp.materialized_view(name="always", refresh_policy="full")
def always():
    return spark.read.table("events")


@dp.materialized_view(name="stamped")
def stamped():
    return spark.read.table("events").agg(F.count("*").alias("n"),
                                          F.current_timestamp().alias("at"))


@dp.materialized_view(name="with_udf")
def with_udf():
    return spark.read.table("events").select(F.udf(lambda v: v * 2, "int")("v").alias("v"))


@dp.materialized_view(name="with_outside")
def with_outside():
    return spark.read.table("events").join(
        spark.read.format("delta").load("{outside}"), "k")
'''


def test_a_view_whose_inputs_did_not_change_is_skipped(spark, settings, tmp_path):
    source, outside = tmp_path / "source", tmp_path / "outside"
    pipelines, warehouse = tmp_path / "pipelines", tmp_path / "warehouse"
    pipelines.mkdir()
    spark.createDataFrame([("a", 1), ("b", 2)], "k STRING, v INT").write.format("delta") \
        .save(str(source))
    spark.createDataFrame([("a", "x")], "k STRING, label STRING").write.format("delta") \
        .save(str(outside))

    def update(aggregate: str = "sum") -> dict[str, str]:
        (pipelines / "views.py").write_text(dedent(PIPELINE).format(
            source=source, outside=outside, aggregate=aggregate))
        result = run_pipeline(spark, settings, warehouse, pipelines_dir=pipelines)
        totals = next(f for f in result.flows if f.flow == "totals")
        # Its expectation counted when it ran; nothing evaluated when skipped.
        assert [(m.name, m.passed_records + m.failed_records) for m in totals.expectations] \
            == ([] if totals.status == "SKIPPED" else [("positive", 2)])
        return {f.flow: f.status for f in result.flows}

    def version(table: str) -> int:
        return delta_log.latest_version(warehouse / table)

    def totals() -> list[tuple]:
        return sorted(map(tuple, spark.read.format("delta").load(str(warehouse / "totals"))
                          .collect()))

    def mode(table: str) -> str:
        info = delta_log.commit_info(warehouse / table, version(table))
        return f"{info['operation']} {info['operationParameters']['mode']}"

    assert set(update().values()) == {"COMPLETED"}
    first = {t: version(t) for t in ("totals", "always", "stamped", "with_udf", "with_outside")}
    # Into its new, empty table a view's rows are appended: nothing to replace.
    assert mode("totals") == "WRITE Append"
    # Nothing new in the source: `events` reads nothing (test_nothing_unread.py), and `totals`
    # reads only `events`, which did not change.
    assert update() == {"events": "SKIPPED", "totals": "SKIPPED", "always": "COMPLETED",
                        "stamped": "COMPLETED", "with_udf": "COMPLETED",
                        "with_outside": "COMPLETED"}
    assert version("totals") == first["totals"] and totals() == [("a", 1), ("b", 2)]
    assert version("always") > first["always"]  # refresh_policy="full"
    assert version("stamped") > first["stamped"]  # the clock is an input
    assert version("with_udf") > first["with_udf"]  # code its plan does not show
    assert version("with_outside") > first["with_outside"]  # a table outside the pipeline
    log = event_log.read(spark, Warehouse(warehouse)).where(
        "event_type = 'flow_progress' AND origin.flow_name = 'totals'")
    assert sorted(r.status for r in log.select("details.flow_progress.status").collect()) \
        == ["COMPLETED", "SKIPPED"]
    # Its query changed, its input did not: recomputed.
    assert update(aggregate="max")["totals"] == "COMPLETED"
    assert update(aggregate="max")["totals"] == "SKIPPED"
    # New rows in its input: recomputed.
    spark.createDataFrame([("a", 5)], "k STRING, v INT").write.format("delta").mode("append") \
        .save(str(source))
    assert update(aggregate="max")["totals"] == "COMPLETED"
    assert totals() == [("a", 5), ("b", 2)]
    assert mode("totals") == "WRITE Overwrite"


def test_a_view_over_a_table_rebuilt_by_a_full_refresh_is_recomputed(spark, settings, tmp_path):
    """A full refresh rebuilds a table from its sources, and its versions count from the start
    again: the view over it is recomputed even when the rebuilt table's version is the one the
    view last read."""
    source, pipelines, warehouse = tmp_path / "source", tmp_path / "pipelines", \
        tmp_path / "warehouse"
    pipelines.mkdir()
    spark.createDataFrame([("a", 1)], "k STRING, v INT").write.format("delta").save(str(source))
    (pipelines / "views.py").write_text(dedent('''
        from pyspark import pipelines as dp
        from pyspark.sql import functions as F


        @dp.table(name="events")
        def events():
            return spark.readStream.format("delta").load("{source}")


        @dp.materialized_view(name="totals")
        def totals():
            return spark.read.table("events").groupBy("k").agg(F.sum("v").alias("v"))
        ''').format(source=source))

    def update(**options) -> dict[str, str]:
        result = run_pipeline(spark, settings, warehouse, pipelines_dir=pipelines, **options)
        return {f.flow: f.status for f in result.flows}

    assert update() == {"events": "COMPLETED", "totals": "COMPLETED"}
    read_before = delta_log.latest_version(warehouse / "events")
    spark.createDataFrame([("b", 2)], "k STRING, v INT").write.format("delta").mode("append") \
        .save(str(source))
    assert update(full_refresh=["events"], refresh=["totals"])["totals"] == "COMPLETED"
    assert delta_log.latest_version(warehouse / "events") == read_before  # same number, new rows
    assert sorted(map(tuple, spark.read.format("delta").load(str(warehouse / "totals"))
                      .collect())) == [("a", 1), ("b", 2)]
