"""Local Kafka tooling: a KRaft broker, the kcat JSONL envelope, a producer and a generator, and
`sink_transactions`, a pipeline sink's micro-batches each sent once in a Kafka transaction.

`broker`, `producer` and `sink_transactions` need confluent-kafka (the `local` extra); `kcat` and
`generator` are pure Python, so tests and pipelines can use recorded streams without any broker.
"""
