"""Silver orders: parsed, validated order events, each event_id once within the watermark."""

from pyspark import pipelines as dp

from exactly_once.config import pipeline_settings
from exactly_once.transforms.silver import deduplicate_events, parse_events, valid_events

orders = pipeline_settings(spark).topic("orders")


@dp.table(name="silver_orders", comment="Valid order events; redeliveries dropped.")
def silver_orders():
    parsed = parse_events(spark.readStream.table("bronze_kafka_events"), orders)
    return deduplicate_events(valid_events(parsed, orders), orders)
