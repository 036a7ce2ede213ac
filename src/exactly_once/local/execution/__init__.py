"""One pipeline update, executed: every flow of the graph run on Spark, upstream first.

    pipeline.py    the entry point: settings in, one update out (under the warehouse lock)
    update.py      the update: flows ordered by what they read, independent ones in parallel
    flow_kinds.py  what kind of flow a flow is, and the function that runs it
    flows.py       one flow: streaming append, once append, materialized view, AUTO CDC
    sinks.py       one flow into a sink: delta or kafka, exactly once across crashes
    streams.py     the streaming queries: availableNow with a foreachBatch writer
    refresh.py     which tables an update refreshes and which it resets
    unchanged.py   whether a materialized view's inputs changed since its last refresh
    failures.py    a failed flow as one line
    continuous.py  updates paced by a trigger interval until stopped
    train_jvm.py   `make setup`'s training update for the engine's class archive

May import observe, graph, auto_cdc, storage and engine; never inspect, which reads what an
update wrote.
"""
