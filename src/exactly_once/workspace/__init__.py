"""The local workspace: a bundle's pipelines with what a Databricks workspace gives them, on this
machine. What the CLI's pipeline commands and the pytest plugin run.

    pipelines.py   a bundle's pipeline, locally: its files, configuration, root_path, catalog
                   and schema, the project's conf/ settings where the bundle carries conf/, and
                   where its warehouse and local catalog live
    tables.py      a table by any name the pipeline's code could use, read back (`show`)

Imports the runtime (`local`), `bundle` and `settings`; the CLI and `testing` import it.
"""
