from pyspark import pipelines as dp
from pyspark.sql.functions import col


@dp.table(comment="Trips of the samples catalog that went somewhere.")
@dp.expect_or_drop("positive_distance", "trip_distance > 0")
def trips():
    return spark.read.table("samples.nyctaxi.trips").select(
        "pickup_zip", "trip_distance", col("fare_amount").alias("fare"))
