-- Databricks notebook source
-- MAGIC %md
-- MAGIC # Fares per pickup zip
-- MAGIC One row per zip code the short trips start from.

-- COMMAND ----------

CREATE OR REFRESH MATERIALIZED VIEW zip_report AS
SELECT
  pickup_zip,
  COUNT(*) AS trips,
  ROUND(SUM(fare_amount), 2) AS total_fare
FROM short_trips
GROUP BY pickup_zip

-- COMMAND ----------

CREATE OR REFRESH MATERIALIZED VIEW busiest_zip AS
SELECT pickup_zip, trips
FROM zip_report
ORDER BY trips DESC, pickup_zip
LIMIT 1
