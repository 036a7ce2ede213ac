from pyspark import pipelines as dp
from pyspark.sql.functions import count


@dp.table(comment="Ride events as they land in the volume, each file once.")
def rides():
    return (spark.readStream.format("cloudFiles")
            .option("cloudFiles.format", "json")
            .schema("zip BIGINT")
            .load("/Volumes/main/taxis/rides"))


@dp.materialized_view
def rides_per_zip():
    return spark.read.table("rides").groupBy("zip").agg(count("*").alias("rides"))
