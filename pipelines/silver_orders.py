"""Silver orders: parsed order events that pass every rule, each event_id once within the watermark.

The rules in conf/base.yml (`topics.orders.rules`) are expectations on `checked_orders`: a failing
event is dropped there and counted in the event log, and `quarantine.py` keeps it with the names
of every rule it failed. Records that are not well-formed (bad JSON, wrong types) never reach the
rules: they go to quarantine only.
"""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.config import pipeline_settings
from exactly_once.transforms.silver import (
    KAFKA_LINEAGE,
    deduplicate_events,
    event_schema,
    parse_events,
)

orders = pipeline_settings(spark).topic("orders")
fields = [f.name for f in event_schema(orders)]


@dp.temporary_view(name="checked_orders", comment="Well-formed order events that pass the rules.")
@dp.expect_all_or_drop(dict(orders.rules))
def checked_orders():
    parsed = parse_events(spark.readStream.table("bronze_kafka_events"), orders)
    parse_errors = F.array_except("errors", F.array(*map(F.lit, orders.rules)))
    return parsed.where(F.size(parse_errors) == 0).select(*fields, "kafka_key", *KAFKA_LINEAGE)


@dp.table(name="silver_orders", comment="Valid order events; redeliveries dropped.")
def silver_orders():
    checked = spark.readStream.table("checked_orders").select(*fields, *KAFKA_LINEAGE)
    return deduplicate_events(checked, orders)
