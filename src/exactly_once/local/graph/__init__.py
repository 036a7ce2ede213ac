"""The pipeline as declared: files loaded into a dataflow graph, checked without data.

    loader.py         runs each pipeline file unchanged and returns the graph it declares
    registry.py       collects datasets and flows through pyspark's registration hook, and
                      checks them: a mistake is a DeclarationError naming file and dataset
    dp_extensions.py  Databricks' `dp` API that open-source pyspark lacks (AUTO CDC, expectations)
    flow_declarations.py  `append_flow` and `create_sink` with Databricks' arguments
    dataset_declarations.py  `dp.table`, `materialized_view`, `temporary_view`,
                      `create_streaming_table` with every argument Databricks documents
    expectations.py   expectation decorators and their evaluation on a DataFrame
    reads.py          reads of pipeline datasets resolved as Databricks resolves them (LIVE.)
    legacy_dlt.py     the legacy `dlt` module, what a pipeline file's `import dlt` gives
    sql_files.py      a pipeline SQL file as statements (Spark's splitter), `${key}` substituted
    sql_statements.py what a SQL statement declares, parsed by Spark's parser; Databricks'
                      clauses (OR REFRESH, PRIVATE, CONSTRAINT ... EXPECT, ONCE) read here
    sql_auto_cdc.py   AUTO CDC INTO / APPLY CHANGES INTO as create_auto_cdc_flow's arguments
    sql_queries.py    a statement's query and its reads, made as Python flows make them
    sql_read_files.py `read_files(...)`: the seam the SQL layer calls, which Auto Loader fills
    sql_declarations.py  a SQL file's statements registered through the `dp` declarations
    source_locations.py  where a declaration is written: a Python line or a SQL statement
    dataflow.py       the graph as a person reads it: text, Mermaid, dot, JSON
    dry_run.py        `exactly-once dry-run`: every dataset analyzed, nothing read or written

May import auto_cdc, storage and engine; never observe, execution or inspect.
"""
