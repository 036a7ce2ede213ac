"""What an update reports, and what a person reads of a warehouse afterwards.

    progress.py    what a person sees while an update runs; each flow's metrics
    timeline.py    where an update's seconds go: spans per flow and phase
    event_log.py   the event log, a Delta table shaped like Databricks'
    event_view.py  the event log a line per event (`exactly-once events`)
    preview.py     a warehouse's tables and a table's first rows (`exactly-once show`)

May import graph, auto_cdc, storage and engine; never execution.
"""
