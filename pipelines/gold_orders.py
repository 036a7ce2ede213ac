"""Gold orders: current state per order (SCD1), newest sequence wins, deletes applied.

Reads silver. A redelivery that outlived silver's watermark is harmless here: the sequence guard
ignores it (it is never newer than what it repeats).
"""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.table_properties import TOMBSTONES_KEPT
from exactly_once.transforms.silver import SILVER_ONLY

orders = pipeline_settings(spark).topic("orders")

# A deleted order stays deleted however late an older copy of one of its events arrives.
dp.create_streaming_table(name="orders", comment="Current state of each order.",
                          table_properties=TOMBSTONES_KEPT)

dp.create_auto_cdc_flow(
    target="orders",
    source="silver_orders",
    keys=[orders.key],
    sequence_by=F.struct(*orders.sequence_by),
    apply_as_deletes=F.col("event_type").isin(*orders.delete_event_types),
    except_column_list=SILVER_ONLY,
    stored_as_scd_type=1,
)
