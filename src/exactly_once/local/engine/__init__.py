"""The engine the runtime runs on: the Spark session and the JVM under it.

    session.py          the SparkSession: Delta, the Kafka source, the settings an update needs
    sql_parser.py       SQL text (expressions, a table's DDL schema) parsed as the session
                        parses it, with no query to analyze
    local_fs.py         local files through Java NIO, not chmod/readlink processes
                        (jvm/local-fs)
    hadoop_defaults.py  Hadoop's configuration without YARN's defaults (jvm/hadoop-defaults)
    catalog_plugin.py   the Spark catalog plugin of the local catalog's catalogs
                        (jvm/local-catalog): its class path, where it reads, the names
    jvm_parts.py        the JVM parts above and Delta's jars, found in the clone or made on
                        first use (an installed package: javac, Maven Central)
    jvm_options.py      the Spark JVMs' options: the JIT, the collector, the class archive
    class_archive.py    the JVM's class-data-sharing archive, mapped at start
    py4j_lookups.py     the classes, packages and static methods PySpark names, looked up
                        once per gateway
    sql_columns.py      columns built as SQL text: one py4j call, not one a column
    update_settings.py  the settings an update runs with (the pipeline's configuration too),
                        and those of one block (a MERGE's); the session's own back after
    pipeline_session.py the session pipeline code sees on each thread; a flow's own (spark_conf)
    jvm_processes.py    the child processes the JVM starts, recorded by Java Flight Recorder
    materialize.py      a batch's rows computed once, cut from their plan, safe from executor loss
    deployment.py       the master, the driver's address, what executors need (jars, S3A settings)

The bottom wing: it imports no other wing.
"""
