from pyspark import pipelines as dp


@dp.table(comment="Every trip of the samples catalog, as it is.")
def raw_trips():
    return spark.read.table("samples.nyctaxi.trips")
