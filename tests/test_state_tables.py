"""AUTO CDC state tables are created by one Delta commit, with the schema a write would store."""

from __future__ import annotations

from pyspark.sql import functions as F

from exactly_once.local.storage.warehouse import as_written, create_empty_table


def test_a_created_state_table_takes_what_a_write_of_its_schema_would(spark, tmp_path):
    rows = spark.range(1).select(
        F.col("id"), F.struct(F.lit(True).alias("deleted"), F.lit("x").alias("content")).alias("t"))
    assert not rows.schema["id"].nullable  # Spark's own expressions: NOT NULL
    written, created = str(tmp_path / "written"), str(tmp_path / "created")
    rows.limit(0).write.format("delta").save(written)
    create_empty_table(spark, created, as_written(rows.schema))
    read = lambda path: spark.read.format("delta").load(path)  # noqa: E731
    assert read(created).schema == read(written).schema
    # A NULL where the expressions had none is stored, as the write's table stores it.
    nulls = spark.createDataFrame([(None, None)], read(written).schema)
    nulls.write.format("delta").mode("append").save(created)
    assert read(created).count() == 1
