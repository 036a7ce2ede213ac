"""Silver orders: order events that pass every rule, each redelivery dropped within the watermark.

The rules in conf/base.yml (`topics.orders.rules`) are expectations on `checked_orders`, read
from the verdicts `parsed_orders` recorded: a failing event is dropped there and counted per rule
in the event log, and `quarantine.py` keeps it with the names of every rule it failed. Records
that are not well-formed (bad JSON, wrong types) never reach the rules: they go to quarantine only.
"""

from pyspark import pipelines as dp

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.transforms.silver import rule_verdicts, silver_events, well_formed_events

orders = pipeline_settings(spark).topic("orders")


@dp.temporary_view(name="checked_orders", comment="Well-formed order events.")
@dp.expect_all_or_drop(rule_verdicts(orders))
def checked_orders():
    return well_formed_events(spark.readStream.table("parsed_orders"), orders)


@dp.table(name="silver_orders", comment="Valid order events; redeliveries dropped.")
def silver_orders():
    return silver_events(spark.readStream.table("checked_orders"), orders)
