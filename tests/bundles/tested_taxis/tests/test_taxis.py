from exactly_once.testing import assert_table


def test_fares_by_zip_alone(pipeline):
    """One dataset on given rows: the SQL materialized view, the rest not run."""
    rows = pipeline.dataset("fares_by_zip", given={"trips": [
        {"pickup_zip": 10103, "trip_distance": 1.0, "fare": 8.0},
        {"pickup_zip": 10103, "trip_distance": 2.0, "fare": 4.5},
    ]})
    assert_table(rows, [{"pickup_zip": 10103, "trips": 2, "total_fare": 12.5}])


def test_an_update_over_the_fixture_table(pipeline):
    """fixtures/samples.nyctaxi.trips.json: six trips, one of them of no distance."""
    pipeline.update()
    assert_table(pipeline.table("fares_by_zip"), [
        {"pickup_zip": 10103, "trips": 1, "total_fare": 8.0},
        {"pickup_zip": 10023, "trips": 1, "total_fare": 7.5},
        {"pickup_zip": 10001, "trips": 1, "total_fare": 9.5},
        {"pickup_zip": 10044, "trips": 1, "total_fare": 11.5},
        {"pickup_zip": 10199, "trips": 1, "total_fare": 18.5},
    ])
    assert pipeline.expectations("trips") == {
        "positive_distance": {"passed": 5, "failed": 1, "dropped": 1}}


def test_rides_arrive_in_two_updates(pipeline):
    pipeline.given("/Volumes/main/taxis/rides", [{"zip": 1}, {"zip": 2}])
    pipeline.update()
    assert_table(pipeline.table("rides_per_zip"),
                 [{"zip": 1, "rides": 1}, {"zip": 2, "rides": 1}])
    pipeline.given("/Volumes/main/taxis/rides", [{"zip": 1}])
    pipeline.update()
    assert_table(pipeline.table("rides_per_zip"),
                 [{"zip": 1, "rides": 2}, {"zip": 2, "rides": 1}])


def test_a_test_gives_the_trips_table_rows_of_its_own(pipeline):
    pipeline.given("samples.nyctaxi.trips",
                   [{"pickup_zip": 1, "trip_distance": 1.0, "fare_amount": 3.0}])
    pipeline.update()
    assert_table(pipeline.table("fares_by_zip"),
                 [{"pickup_zip": 1, "trips": 1, "total_fare": 3.0}])


def test_the_trips_table_by_its_name(spark):
    """As a test through Databricks Connect reads a workspace's table: the fixture's six trips,
    whatever the test before gave its pipeline."""
    trips = spark.read.table("samples.nyctaxi.trips")
    assert trips.count() == 6
    assert spark.table("samples.nyctaxi.trips").where("trip_distance = 0").count() == 1


def test_a_fixture_file_by_its_name(load_fixture):
    assert load_fixture("samples.nyctaxi.trips.json").count() == 6


def test_databricks_connect_gives_the_same_session(spark):
    """Where databricks-connect is not installed, its DatabricksSession is the local session;
    `create` is a new session of it, with temporary views of its own."""
    from databricks.connect import DatabricksSession

    assert DatabricksSession.builder.serverless().validateSession().getOrCreate() is spark
    spark.range(3).createOrReplaceTempView("three")
    other = DatabricksSession.builder.create()
    assert other is not spark and not other.catalog.tableExists("three")
    assert other.read.table("samples.nyctaxi.trips").count() == 6
