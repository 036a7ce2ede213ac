"""Exactly-once effects from at-least-once Kafka delivery in a Delta lakehouse.

The package's parts import one way: a part may import the parts on the lines below its own,
never one on its line or above (tests/test_layering.py keeps that true; inside `local/` its
wings do the same, `local.WINGS`):

    testing                       the pytest plugin (a test session may go to the engine)
    cli                           the command line
    quality, deploy, services,    data quality; deployment files; the local services;
      workspace                   a bundle's pipelines with what a workspace gives them
    local                         the local runtime
    transforms                    bronze / silver / gold logic, what the pipeline files call
    kafka, exports                Kafka tooling; daily export files
    settings, table_properties,   conf/, read in one place; the table properties the runtime reads;
      bundle                      a Databricks Asset Bundle, read as the Databricks CLI reads it
    errors, paths

Nothing is imported here.
"""

# Highest first; the order the docstring above gives.
LAYERS = (
    ("testing",),
    ("cli",),
    ("quality", "deploy", "services", "workspace"),
    ("local",),
    ("transforms",),
    ("kafka", "exports"),
    ("settings", "table_properties", "bundle"),
    ("errors", "paths"),
)
