"""Test a bundle's pipeline with pytest: a plugin (registered through the `pytest11` entry point,
so any repository that installs the project has it) and what its tests call.

    plugin.py      the fixtures (`spark`, `load_fixture`, `pipeline`, `pipeline_for`) and the
                   collection of YAML tests; nothing runs until a test asks for a fixture
    local_session.py   the session's one Spark session, with a catalog of the bundle's
                   fixture tables: what `spark` and Databricks Connect give
    databricks_connect.py  `databricks.connect.DatabricksSession`, locally, where
                   databricks-connect is not installed: the templates' conftest runs as it is
    harness.py     a pipeline on a throwaway warehouse and catalog: given rows, updates, tables,
                   expectations' counts, the event log
    units.py       one dataset's query on given rows, the rest of the pipeline not run
    compare.py     `assert_table`: a table against the rows expected, with a diff that names rows
    yaml_tests.py  tests as data: `*.pipeline_test.yml`, given rows and expected rows

Imports `workspace` (a bundle's pipeline, locally) and the runtime, only when a test runs.
"""

from exactly_once.testing.compare import assert_table

__all__ = ["assert_table"]
