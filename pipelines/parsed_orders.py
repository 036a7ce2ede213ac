"""Parsed orders: every order record of bronze, parsed and checked once, with `errors`.

The one place a value is parsed. Silver (the valid events) and quarantine (the rest, with their
reasons) both read this table, so neither parses again: Databricks' quarantine pattern, a table
with the verdict next to each record and the two sides read from it.
"""

from pyspark import pipelines as dp

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.transforms.silver import parse_events

topic = pipeline_settings(spark).topic("orders")


@dp.table(name="parsed_orders",
          comment="Every order record with its typed fields and `errors` (empty: valid).")
def parsed_orders():
    return parse_events(spark.readStream.table("bronze_kafka_events"), topic)
