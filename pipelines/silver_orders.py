"""Silver orders: parsed order events that pass every rule, each event_id once within the watermark.

The rules in conf/base.yml (`topics.orders.rules`) are expectations on `checked_orders`: a failing
event is dropped there and counted in the event log, and `quarantine.py` keeps it with the names
of every rule it failed. Records that are not well-formed (bad JSON, wrong types) never reach the
rules: they go to quarantine only.
"""

from pyspark import pipelines as dp

from exactly_once.config import pipeline_settings
from exactly_once.transforms.silver import (
    deduplicate_events,
    parse_events,
    silver_columns,
    well_formed_events,
)

orders = pipeline_settings(spark).topic("orders")


@dp.temporary_view(name="checked_orders", comment="Well-formed order events.")
@dp.expect_all_or_drop(dict(orders.rules))
def checked_orders():
    parsed = parse_events(spark.readStream.table("bronze_kafka_events"), orders)
    return well_formed_events(parsed, orders)


@dp.table(name="silver_orders", comment="Valid order events; redeliveries dropped.")
def silver_orders():
    checked = silver_columns(spark.readStream.table("checked_orders"), orders)
    return deduplicate_events(checked, orders)
