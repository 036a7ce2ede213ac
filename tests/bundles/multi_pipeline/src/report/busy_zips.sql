-- Pickup zip codes with at least `report.min_trips` trips, read from the ingest pipeline's
-- table by its three-part name (the configuration's `report.source`).
CREATE OR REFRESH MATERIALIZED VIEW busy_zips AS
SELECT pickup_zip, COUNT(*) AS trips, SUM(fare_amount) AS total_fare
FROM ${report.source}
GROUP BY pickup_zip
HAVING COUNT(*) >= ${report.min_trips};
