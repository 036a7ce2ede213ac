"""Data quality around the pipeline: Great Expectations suites, Data Docs, the local dashboard."""
