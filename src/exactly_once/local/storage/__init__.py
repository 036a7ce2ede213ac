"""The warehouse on disk: where each table, checkpoint and state lives, and how it is written.

    warehouse.py       the layout: tables, checkpoints, AUTO CDC state, the pipeline's own files
    delta_log.py       a Delta table's log read directly, no Spark job
    table_definition.py a table's declared definition as Delta keeps it (comment, properties,
                       partitioning, clustering, a declared schema), a query checked against it
    table_templates.py a new table's first commit, as Delta wrote it for the same definition
                       earlier in this process, with an id and a time of its own
    snapshot_files.py  a table's latest version read as the Parquet files its log names
    lock.py            one update at a time per warehouse
    idempotent.py      Delta writes that a replayed micro-batch does not repeat
    schema_evolution.py  a table's schema against what its flow writes: columns added, types
                       widened in place, the rest named as incompatible
    files.py           the one file-system interface: local paths and s3a:// object-store keys

May import engine only.
"""
