"""Exactly-once effects from at-least-once Kafka delivery in a Delta lakehouse."""
