"""Silver player rewards: XP grants that pass every rule, each event_id once within the watermark.

The rules in conf/base.yml (`topics.player_rewards.rules`) are expectations on
`checked_player_rewards`: a failing event is dropped there and counted in the event log, and
`quarantine.py` keeps it with the names of every rule it failed. Records that are not well-formed
(bad JSON, wrong types) never reach the rules: they go to quarantine only.
"""

from pyspark import pipelines as dp

from exactly_once.config import pipeline_settings
from exactly_once.transforms.silver import (
    deduplicate_events,
    parse_events,
    silver_columns,
    well_formed_events,
)

rewards = pipeline_settings(spark).topic("player_rewards")


@dp.temporary_view(name="checked_player_rewards", comment="Well-formed XP grants.")
@dp.expect_all_or_drop(dict(rewards.rules))
def checked_player_rewards():
    parsed = parse_events(spark.readStream.table("bronze_kafka_events"), rewards)
    return well_formed_events(parsed, rewards)


@dp.table(name="silver_player_rewards", comment="Valid XP grants; redeliveries dropped.")
def silver_player_rewards():
    checked = silver_columns(spark.readStream.table("checked_player_rewards"), rewards)
    return deduplicate_events(checked, rewards)
