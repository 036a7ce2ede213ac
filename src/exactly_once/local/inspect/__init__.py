"""A finished warehouse read back for a person: its tables, its event log, a key's deliveries.

    preview.py        a warehouse's tables and a table's first rows (`exactly-once show`)
    event_view.py     the event log a line per event (`exactly-once events`)
    explain.py        every delivery of a key, from Kafka to gold (`exactly-once explain`)
    explain_reads.py  the key's rows in every table, read with filters at pinned versions
    delivery.py       a delivery of the key and its verdict
    verdicts.py       each delivery's one verdict, judged from those rows up to silver
    gold_verdicts.py  ... and in gold: applied, stale, tombstoned, late, in log order
    explain_text.py   an explanation as text, and as JSON

It reads what an update wrote; it never writes. What it cannot find (a warehouse, table, key,
event, update, flow) is an `InspectError` naming what is there. The top wing: it may import
observe (the event log), graph, auto_cdc, storage and engine; only cli/ and quality/ import it.
"""
