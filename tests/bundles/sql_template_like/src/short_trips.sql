-- Trips under five miles, from the samples catalog.
CREATE OR REFRESH MATERIALIZED VIEW short_trips AS
SELECT
  pickup_zip,
  dropoff_zip,
  trip_distance,
  fare_amount
FROM samples.nyctaxi.trips
WHERE trip_distance < 5;
