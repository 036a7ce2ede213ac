"""Silver player rewards: XP grants that pass every rule, each event_id once within the watermark.

The rules in conf/base.yml (`topics.player_rewards.rules`) are expectations on
`checked_player_rewards`: a failing event is dropped there and counted in the event log, and
`quarantine.py` keeps it with the names of every rule it failed. Records that are not well-formed
(bad JSON, wrong types) never reach the rules: they go to quarantine only.
"""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.config import pipeline_settings
from exactly_once.transforms.silver import (
    KAFKA_LINEAGE,
    deduplicate_events,
    event_schema,
    parse_events,
)

rewards = pipeline_settings(spark).topic("player_rewards")
fields = [f.name for f in event_schema(rewards)]


@dp.temporary_view(name="checked_player_rewards",
                   comment="Well-formed XP grants that pass the rules.")
@dp.expect_all_or_drop(dict(rewards.rules))
def checked_player_rewards():
    parsed = parse_events(spark.readStream.table("bronze_kafka_events"), rewards)
    parse_errors = F.array_except("errors", F.array(*map(F.lit, rewards.rules)))
    return parsed.where(F.size(parse_errors) == 0).select(*fields, "kafka_key", *KAFKA_LINEAGE)


@dp.table(name="silver_player_rewards", comment="Valid XP grants; redeliveries dropped.")
def silver_player_rewards():
    checked = spark.readStream.table("checked_player_rewards").select(*fields, *KAFKA_LINEAGE)
    return deduplicate_events(checked, rewards)
