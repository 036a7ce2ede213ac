"""What an update reports, and what a person reads of a warehouse afterwards.

    progress.py       what a person sees while an update runs; each flow's metrics
    timeline.py       where an update's seconds go: spans per flow and phase
    event_log.py      the event log, a Delta table shaped like Databricks'
    event_view.py     the event log a line per event (`exactly-once events`)
    preview.py        a warehouse's tables and a table's first rows (`exactly-once show`)
    explain.py        every delivery of a key, from Kafka to gold (`exactly-once explain`)
    explain_reads.py  the key's rows in every table, read with filters at pinned versions
    delivery.py       a delivery of the key and its verdict
    verdicts.py       each delivery's one verdict, judged from those rows up to silver
    gold_verdicts.py  ... and in gold: applied, stale, tombstoned, late, in log order
    explain_text.py   an explanation as text, and as JSON

May import graph, auto_cdc, storage and engine; never execution.
"""
