from fare_rules import at_least, fare_with_tip
from pyspark import pipelines as dp
from pyspark.sql.functions import col, lit

MIN_FARE = float(spark.conf.get("fares.min_fare"))
CURRENCY = spark.conf.get("fares.currency")


@dp.materialized_view(comment="Trips at or above the configured minimum fare, with a tip.")
def fares():
    return (
        spark.read.table("samples.nyctaxi.trips")
        .where(at_least(MIN_FARE))
        .select(
            "pickup_zip",
            col("fare_amount"),
            fare_with_tip(col("fare_amount")).alias("fare_with_tip"),
            lit(CURRENCY).alias("currency"),
        )
    )
