"""Pipeline parameters as Databricks documents them: key-value pairs of the pipeline's
configuration, read in the pipeline's source with `spark.conf.get`, at the top of a file and
inside a dataset's function. Locally they come from `run_pipeline(..., configuration=...)` and
`exactly-once run --conf KEY=VALUE`.

Page: https://docs.databricks.com/aws/en/ldp/parameters
"""

from __future__ import annotations

import json

from docs_corpus import ERROR, dp_file, pipeline, rows, run

from exactly_once import cli

PARAMETERS = "https://docs.databricks.com/aws/en/ldp/parameters"

TRANSACTIONS = dp_file('''
    from pyspark.sql.functions import col

    start_date = spark.conf.get("mypipeline.startDate")

    @dp.materialized_view
    def transactions():
      return spark.createDataFrame(
        [(1, "2021-01-01", "a1", 10.0), (2, "2021-01-02", "a1", 20.0),
         (3, "2021-01-03", "a2", 30.0), (4, "2021-01-04", "a2", 40.0)],
        "txn_id INT, transaction_date STRING, account_id STRING, txn_amount DOUBLE")

    @dp.materialized_view
    def transaction_summary():
      account = spark.conf.get("mypipeline.account")
      return (spark.read.table("transactions")
              .filter(col("transaction_date") > start_date)
              .filter(col("account_id") == account))
    ''')


def test_configuration_reaches_spark_conf_get(spark, settings, tmp_path):
    """PARAMETERS: "Pass parameters to pipelines by passing arbitrary key-value pairs as
    configurations for the pipeline"; the source reads them with spark.conf.get, at load and
    when a dataset's query is defined."""
    root = pipeline(tmp_path, transactions=TRANSACTIONS)
    warehouse = tmp_path / "warehouse"
    run(spark, settings, root, warehouse,
        configuration={"mypipeline.startDate": "2021-01-02", "mypipeline.account": "a2"})
    assert rows(spark, warehouse / "transaction_summary", "txn_id") == [(3,), (4,)]


def test_run_conf_sets_a_parameter_for_one_run(in_session, tmp_path, capsys, monkeypatch):
    """PARAMETERS, set from the command line: `exactly-once run --conf KEY=VALUE`."""
    root = pipeline(tmp_path, transactions=TRANSACTIONS)
    dump = tmp_path / "dump.jsonl"  # no broker: a source the project's settings accept
    dump.write_text(json.dumps({"topic": "orders", "key": "o1", "payload": "{}"}) + "\n")
    warehouse = tmp_path / "warehouse"
    code = cli.main(["run", "--quiet", "--pipelines", str(root), "--source", f"file:{dump}",
                     "--warehouse", str(warehouse), "--conf", "mypipeline.startDate=2021-01-01",
                     "--conf", "mypipeline.account=a1"])
    err = capsys.readouterr().err
    assert code == 0 and ERROR not in err, err
    assert rows(in_session, warehouse / "transaction_summary", "txn_id") == [(2,)]
