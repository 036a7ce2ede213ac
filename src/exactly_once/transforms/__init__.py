"""The pipeline's logic as plain functions, DataFrame in, DataFrame out: pipelines/ call these."""
