"""What an update reports while it runs: progress, where its time goes, the event log.

    progress.py   what a person sees while an update runs; each flow's metrics
    timeline.py   where an update's seconds go: spans per flow and phase
    event_log.py  the event log, a Delta table shaped like Databricks'

A finished warehouse is read back by inspect/, above. May import graph, auto_cdc, storage and
engine; never execution or inspect.
"""
