"""AUTO CDC for the local runtime: `dp.create_auto_cdc_flow` and
`dp.create_auto_cdc_from_snapshot_flow` applied with Delta MERGE. Three kinds, three parts:

SCD1 and SCD2 of a change feed (`create_auto_cdc_flow`):

    spec.py         the flow as declared (Databricks signature), checked when the file loads
    changes.py      what SCD1 and SCD2 share about a micro-batch: tagging, tie-break, counts
    commits.py      the writes a replayed batch must not repeat: txn-guarded MERGE, rejected rows
    scd1.py         SCD type 1: current row per key, with a key-state table and tombstones
    scd2.py         SCD type 2: versions per key, replayed from an event journal
    writer.py       the one place that picks SCD1 or SCD2 for a flow

AUTO CDC FROM SNAPSHOT (`create_auto_cdc_from_snapshot_flow`), SCD1 or SCD2 of whole snapshots:

    from_snapshot/  the flow as declared, its versions, a snapshot's diff against the target,
                    its MERGE, and one update of the flow (from_snapshot/__init__.py)

What both declarations take alike (column names, the SCD type and its history columns):

    declaration.py  checked the same way for both

May import storage and engine; never graph, observe, execution or inspect. Nothing is imported here,
so loading a spec does not load Delta.
"""
