"""The local services the project starts and stops on this machine, each a detached process with
a home directory of its own (its state file, logs and data), so `start`, `status` and `stop`
can be different commands:

    broker.py      a single-node Apache Kafka broker (KRaft) for local runs and the tests
    cluster.py     a Spark standalone cluster (a master and one-core workers) for `--master`
    s3_server.py   an S3-compatible object store (versitygw) for `s3a://` warehouses
    engine.py      the resident engine: a warm Spark session the commands run in

    lifecycle.py   what they share: launch, state file, readiness, stop, logs
    processes.py   a process's liveness, its end, free ports on loopback

Development tooling, not the runtime: the runtime only connects to what runs (a broker's
address, a master URL, an endpoint). A service module may import what it starts or probes
(`kafka.admin` for the broker's readiness); nothing in `local/` imports this package.
"""
