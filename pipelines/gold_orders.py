"""Gold orders: current state per order (SCD1), newest sequence wins, deletes applied."""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.config import pipeline_settings
from exactly_once.transforms.silver import KAFKA_LINEAGE

orders = pipeline_settings(spark).topic("orders")

dp.create_streaming_table(name="orders", comment="Current state of each order.")

dp.create_auto_cdc_flow(
    target="orders",
    source="silver_orders",
    keys=[orders.key],
    sequence_by=F.struct(*orders.sequence_by),
    apply_as_deletes=F.col("event_type").isin(*orders.delete_event_types),
    except_column_list=KAFKA_LINEAGE,
    stored_as_scd_type=1,
)
