from pyspark import pipelines as dp
from pyspark.sql.functions import count, sum


@dp.materialized_view(comment="Total fare and number of trips per pickup zip code.")
def fares_by_zip():
    return (
        spark.read.table("taxi_trips")
        .groupBy("pickup_zip")
        .agg(sum("fare_amount").alias("total_fare"), count("*").alias("trips"))
    )
