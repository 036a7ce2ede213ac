CREATE OR REFRESH MATERIALIZED VIEW fares_by_zip AS
SELECT pickup_zip, COUNT(*) AS trips, SUM(fare) AS total_fare
FROM trips
GROUP BY pickup_zip
