"""Auto Loader (`format("cloudFiles")`) and `read_files`, on Spark's own file stream source.

    options.py     the options a read takes (Databricks' `cloudFiles.*` and the format's), the
                   ones the runtime cannot honour refused in one line
    schema_log.py  the schema location: each schema version and the files it was inferred over
    inference.py   the files a read sees, a schema inferred over them (hints applied), new columns
    reader.py      the DataFrame of a read, stream or batch (`read_files`, what SQL calls)
    place.py       which flow's query this thread builds: its checkpoint, file and dataset
    hook.py        `spark.readStream.format("cloudFiles")` in pipeline files, while a flow's
                   query is built: where its schema location is by default

May import storage and engine; never auto_cdc, graph or above.
"""
