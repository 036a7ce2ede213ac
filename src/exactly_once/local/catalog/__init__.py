"""The local catalog: Unity Catalog's three-level names, on this machine, for every process.

    names.py      one-, two- and three-part names, and a pipeline's default catalog and schema
    catalog.py    the catalog's directories: tables it holds, tables pipelines publish, fixture
                  tables seeded from the bundle's fixtures/, /Volumes paths
    fixtures.py   a fixture file (`.json` rows, `.csv`, `.parquet`) read as a DataFrame
    scope.py      what a name read in pipeline code means: a dataset, a catalog table, Spark's

Spark resolves the catalogs' names through a plugin of its own (engine/catalog_plugin.py); this
wing decides what is in them. It imports only storage/ and engine/.
"""
