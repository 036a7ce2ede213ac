"""Deployment files for Databricks, generated from `conf/`: one module per deployment tool.

`bundle_resource` renders the Databricks Asset Bundle's pipeline resource (for
`databricks bundle`) and checks databricks.yml against conf/; `dbx_deployment` renders
conf/deployment.yml for dbx 0.8 (legacy). `targets` holds what both deploy. `contract_schema`
keeps the contract published for producers (conf/<kafka topic>.schema.json) in step with the
topics' schemas and rules; `new_topic` adds a topic's settings and pipeline files
(`exactly-once add-topic`). None imports the local runtime or Spark: generating and checking
these files needs only conf/ and pipelines/.

    python -m exactly_once.deploy write       # regenerate them (`make bundle-config`)
    python -m exactly_once.deploy check       # exit 1 naming what is stale (tests do the same)
    python -m exactly_once.deploy variables dev   # the variable values databricks.yml must set
"""
