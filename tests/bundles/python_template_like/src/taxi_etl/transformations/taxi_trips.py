from pyspark import pipelines as dp
from pyspark.sql.functions import col


@dp.table(comment="Taxi trips from the samples catalog, with a positive distance.")
def taxi_trips():
    return spark.read.table("samples.nyctaxi.trips").where(col("trip_distance") > 0)
