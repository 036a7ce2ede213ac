"""Gold order history (SCD2): one version per change of status or amount, `__START_AT` /
`__END_AT` typed like the sequence (`struct(sequence, event_id)`); the current version of
an order has `__END_AT IS NULL`, a deleted order has none. Other columns update in place.

Same source, keys, sequence and deletes as `orders` (gold_orders.py), so late and out-of-order
events land where their sequence puts them in the history.
"""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.table_properties import TOMBSTONES_KEPT
from exactly_once.transforms.silver import SILVER_ONLY

orders = pipeline_settings(spark).topic("orders")

dp.create_streaming_table(name="orders_history",
                          comment="History of each order's status and amount (SCD type 2).",
                          table_properties=TOMBSTONES_KEPT)  # as `orders`: they never disagree

dp.create_auto_cdc_flow(
    target="orders_history",
    source="silver_orders",
    keys=[orders.key],
    sequence_by=F.struct(*orders.sequence_by),
    apply_as_deletes=F.col("event_type").isin(*orders.delete_event_types),
    except_column_list=SILVER_ONLY,
    stored_as_scd_type=2,
    track_history_column_list=["status", "amount"],
)
