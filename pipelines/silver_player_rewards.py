"""Silver player rewards: XP grants that pass every rule, each redelivery dropped within the
watermark, each marked `arrived_late` when the broker got it more than `max_event_age` after it
happened.

The rules in conf/base.yml (`topics.player_rewards.rules`) are expectations on
`checked_player_rewards`, read from the verdicts `parsed_player_rewards` recorded: a failing event
is dropped there and counted per rule in the event log, and `quarantine.py` keeps it with the
names of every rule it failed. Records that are not well-formed (bad JSON, wrong types) never
reach the rules: they go to quarantine only.
"""

from pyspark import pipelines as dp

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.transforms.silver import rule_verdicts, silver_events, well_formed_events

rewards = pipeline_settings(spark).topic("player_rewards")


@dp.temporary_view(name="checked_player_rewards", comment="Well-formed XP grants.")
@dp.expect_all_or_drop(rule_verdicts(rewards))
def checked_player_rewards():
    return well_formed_events(spark.readStream.table("parsed_player_rewards"), rewards)


@dp.table(name="silver_player_rewards", comment="Valid XP grants; redeliveries dropped.")
def silver_player_rewards():
    return silver_events(spark.readStream.table("checked_player_rewards"), rewards)
