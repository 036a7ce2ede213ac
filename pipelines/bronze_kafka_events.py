"""Bronze: every record of the contract's Kafka topics, exactly as delivered."""

from pyspark import pipelines as dp

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.table_properties import KEPT_THROUGH_FULL_REFRESH
from exactly_once.transforms.bronze import raw_kafka_records

settings = pipeline_settings(spark)


@dp.table(
    name="bronze_kafka_events",
    comment="Raw Kafka records (key, value, topic, partition, offset, timestamp, headers), "
    "one row per delivery, redeliveries included.",
    # Kafka keeps records for its retention only: a full refresh must not drop the rest.
    table_properties=KEPT_THROUGH_FULL_REFRESH,
)
def bronze_kafka_events():
    return raw_kafka_records(spark, settings)
