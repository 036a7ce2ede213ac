"""AUTO CDC for the local runtime: `dp.create_auto_cdc_flow` and
`dp.create_auto_cdc_from_snapshot_flow` applied with Delta MERGE.

    spec.py     the flow as declared (Databricks signature), checked when the file loads
    changes.py  what SCD1 and SCD2 share about a micro-batch: tagging, tie-break, counts
    commits.py  the writes a replayed batch must not repeat: txn-guarded MERGE, rejected rows
    scd1.py     SCD type 1: current row per key, with a key-state table and tombstones
    scd2.py     SCD type 2: versions per key, replayed from an event journal
    writer.py   the one place that picks SCD1 or SCD2 for a flow

`create_auto_cdc_from_snapshot_flow` (AUTO CDC FROM SNAPSHOT):

    snapshot_spec.py      the flow as declared (Databricks signature): a table or a function
    snapshot_versions.py  versions (types, strict order) and the log of the snapshots applied
    snapshot_diff.py      a snapshot against the target's current rows: inserts, updates,
                          deletes, with the snapshot's checks (unique, non-NULL keys) and counts
    snapshot_apply.py     those changes as one MERGE: SCD1, or SCD2 versions opened and closed
    snapshot_flow.py      one update of the flow: ask, check, apply, record, until no snapshot

May import storage and engine; never graph, observe or execution. Nothing is imported here,
so loading a spec does not load Delta.
"""
