"""Local Kafka tooling: a KRaft broker, the kcat JSONL envelope, a producer and a generator.

`broker` and `producer` need confluent-kafka (the `local` extra); `kcat` and `generator` are
pure Python, so tests and pipelines can use recorded streams without any broker.
"""
