"""Runs the pipeline definitions in `pipelines/` on classic PySpark + delta-spark, with Databricks semantics."""
