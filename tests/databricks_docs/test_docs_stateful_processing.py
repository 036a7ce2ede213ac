"""Stateful flows with watermarks, as Databricks' pages write them: a windowed aggregation (in
Python, and in SQL with the WATERMARK clause) and a stream-stream outer join.

Pages:
- stateful processing in pipelines: https://docs.databricks.com/aws/en/ldp/stateful-processing
- watermarks (windowed count, stream-stream joins):
  https://docs.databricks.com/aws/en/structured-streaming/watermarks
- the WATERMARK clause:
  https://docs.databricks.com/aws/en/sql/language-manual/sql-ref-syntax-qry-select-watermark

Databricks runs Spark's defaults, so a triggered update whose data moves a watermark also runs
the micro-batch without data that applies it (`spark.sql.streaming.noDataMicroBatches.enabled`):
a window is in the table after the update that closed it, and an impression no click can match
any more is written with NULL clicks then. An update with nothing new writes nothing: Spark's
query, started with nothing new, runs no batch (the flows are SKIPPED here). An aggregation of a
stream without a watermark ("you must use watermarks", the stateful processing page) cannot be
written to a streaming table, which takes appends: Spark refuses it when the flow starts, and
`dry-run` refuses it first, in the line `run` prints.
"""

from __future__ import annotations

from datetime import datetime

from docs_corpus import dp_file, json_files, pipeline, refusal, rows, run, run_refusal

EVENTS = "id BIGINT, event_time TIMESTAMP"


def at(hour: int, minute: int) -> str:
    return f"2026-11-01T{hour:02d}:{minute:02d}:00"


def moment(hour: int, minute: int) -> datetime:
    return datetime.fromisoformat(at(hour, minute))


def test_an_update_writes_what_its_watermark_closed(spark, settings, tmp_path):
    events, impressions, clicks = tmp_path / "events", tmp_path / "impressions", tmp_path / "clicks"
    root = pipeline(tmp_path, stateful=dp_file(f'''
        @dp.table
        def events():
          return spark.readStream.format("json").schema("{EVENTS}").load("{events}")

        @dp.table
        def counts_per_ten_minutes():
          return (spark.readStream.table("events")
                  .withWatermark("event_time", "10 minutes")
                  .groupBy(F.window("event_time", "10 minutes"))
                  .count())

        @dp.table
        def impressions_and_clicks():
          shown = (spark.readStream.format("json").schema("ad BIGINT, shown_at TIMESTAMP")
                   .load("{impressions}").withWatermark("shown_at", "10 minutes"))
          clicked = (spark.readStream.format("json")
                     .schema("clicked_ad BIGINT, clicked_at TIMESTAMP")
                     .load("{clicks}").withWatermark("clicked_at", "20 minutes"))
          return shown.join(clicked, F.expr("""
              clicked_ad = ad AND
              clicked_at >= shown_at AND
              clicked_at <= shown_at + interval 1 hour"""), "leftOuter")
        '''))
    (root / "windows.sql").write_text(
        "CREATE OR REFRESH STREAMING TABLE counts_per_ten_minutes_sql\n"
        "AS SELECT window(event_time, '10 minutes') AS w, count(*) AS count\n"
        "FROM STREAM events WATERMARK event_time DELAY OF INTERVAL 10 MINUTES AS e\n"
        "GROUP BY window(event_time, '10 minutes');\n")
    warehouse = tmp_path / "warehouse"
    windowed = ("counts_per_ten_minutes", "counts_per_ten_minutes_sql")

    def windows(table: str) -> list[tuple[str, int]]:
        return [(w.start.strftime("%H:%M"), n) for w, n in rows(spark, warehouse / table)]

    # 10:00-10:25: the watermark moves to 10:15, which closes [10:00, 10:10) only. Ad 2 is
    # shown at 10:10 and never clicked: once the clicks' watermark (11:40) is past 11:10, no
    # click can match it.
    json_files(events, first=[{"id": m, "event_time": at(10, m)} for m in range(0, 30, 5)])
    json_files(impressions, first=[{"ad": 1, "shown_at": at(10, 0)},
                                   {"ad": 2, "shown_at": at(10, 10)},
                                   {"ad": 3, "shown_at": at(12, 0)}])
    json_files(clicks, first=[{"clicked_ad": 1, "clicked_at": at(10, 5)},
                              {"clicked_ad": 3, "clicked_at": at(12, 0)}])
    run(spark, settings, root, warehouse)
    for table in windowed:
        assert windows(table) == [("10:00", 2)], table
    assert rows(spark, warehouse / "impressions_and_clicks") == [
        (1, moment(10, 0), 1, moment(10, 5)), (2, moment(10, 10), None, None),
        (3, moment(12, 0), 3, moment(12, 0))]

    # 10:40: the watermark moves to 10:30; [10:10, 10:20) and [10:20, 10:30) close, once each.
    json_files(events, second=[{"id": 40, "event_time": at(10, 40)}])
    run(spark, settings, root, warehouse)
    for table in windowed:
        assert windows(table) == [("10:00", 2), ("10:10", 2), ("10:20", 2)], table

    # Nothing new: no flow reading the pipeline's tables starts, and nothing is written.
    before = {t: rows(spark, warehouse / t) for t in windowed}
    result = run(spark, settings, root, warehouse)
    assert {f.flow: f.status for f in result.flows if f.flow in windowed} == {
        t: "SKIPPED" for t in windowed}
    assert {t: rows(spark, warehouse / t) for t in windowed} == before


def test_an_aggregation_without_a_watermark_is_one_line(in_session, settings, tmp_path, capsys):
    source = json_files(tmp_path / "events", a=[{"id": 1, "event_time": at(10, 0)}])
    root = pipeline(tmp_path, totals=dp_file(f'''
        @dp.table
        def counts_per_id():
          return (spark.readStream.format("json").schema("{EVENTS}").load("{source}")
                  .groupBy("id").count())
        '''))
    line = refusal(root, capsys, "totals", "counts_per_id",
                   ["append", "streaming aggregations without watermark"])
    assert run_refusal(in_session, settings, root, tmp_path / "warehouse") == line
