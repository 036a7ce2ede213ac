"""AUTO CDC FROM SNAPSHOT: `create_auto_cdc_from_snapshot_flow`, a table or a function's
snapshots turned into SCD1 or SCD2 changes of the target.

    spec.py      the flow as declared (Databricks signature): a table or a function
    versions.py  versions (types, strict order) and the log of the snapshots applied
    diff.py      a snapshot against the target's current rows: inserts, updates, deletes, with
                 the snapshot's checks (unique, non-NULL keys) and counts
    apply.py     those changes as one MERGE: SCD1, or SCD2 versions opened and closed
    flow.py      one update of the flow: ask, check, apply, record, until no snapshot

It shares the declaration's checks (declaration.py) and SCD2's `__START_AT` / `__END_AT`
(scd2.py) with the change-feed flows. Nothing is imported here.
"""
