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
    dataflow.py       the graph as a person reads it: text, Mermaid, dot, JSON
    dry_run.py        `exactly-once dry-run`: every dataset analyzed, nothing read or written

May import auto_cdc, storage and engine; never observe, execution or inspect.
"""
