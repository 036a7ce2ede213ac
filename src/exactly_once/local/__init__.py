"""Runs the files in `pipelines/` on classic PySpark + delta-spark, with Databricks semantics.

The runtime is grouped in wings by what each part is for. A wing may import the wings below it
in this list, never one above it (tests/test_layering.py keeps that true):

    inspect/    a finished warehouse read back: `show`, `events`, `explain`
    execution/  an update: the graph run flow by flow, upstream first; refresh, continuous runs
    observe/    what an update reports: progress, timeline, event log
    graph/      the pipeline files loaded into a dataflow graph, `dp` extensions, dry-run
    auto_cdc/   AUTO CDC applied to Delta: SCD1, SCD2 and from snapshots
    auto_loader/ Auto Loader (`format("cloudFiles")`) and `read_files` on Spark's file stream
    catalog/    the local catalog: three-level names, fixture tables, /Volumes paths
    storage/    the warehouse on disk: layout, Delta log reads, the lock, idempotent writes
    engine/     the Spark session and the JVM it runs in

Nothing is imported here: importing one wing loads only what it needs.
"""

# Highest first; the order the docstring above gives.
WINGS = ("inspect", "execution", "observe", "graph", "auto_cdc", "auto_loader", "catalog",
         "storage", "engine")
