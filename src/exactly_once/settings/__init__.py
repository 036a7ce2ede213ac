"""The project's settings, read from `conf/` in one place (`conf_files.py`), each kind a module of
typed, frozen dataclasses:

    pipeline.py       what the pipeline reads: the source, Kafka, the topics' contract and
                      rules, flattened into the Spark conf as `exactly_once.*` keys and read back
    configuration.py  the pipeline's parameters (`configuration:`): what pipeline code reads
                      with `spark.conf.get`, on Databricks and locally
    exports.py        reference tables that arrive as daily snapshot files (`exports:`)
    engine.py         where the local runtime runs (`engine:`): not pipeline settings,
                      Databricks brings its own compute
    quality.py        the table-level checks of the Great Expectations suites (`quality.tables`)
    values.py         the checks of a setting's value, shared by the modules above
    conf_files.py     conf/base.yml with conf/targets/<target>.yml merged over it

The package imports only `errors` and `paths`: every other part of the project may import it.
"""
