"""Runs the files in `pipelines/` on classic PySpark + delta-spark, with Databricks semantics."""
