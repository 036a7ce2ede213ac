"""Late events: XP grants too old to apply (max_event_age), kept with the reason, never lost."""

from pyspark import pipelines as dp

from exactly_once.config import pipeline_settings
from exactly_once.transforms.gold import late_events

rewards = pipeline_settings(spark).topic("player_rewards")

dp.create_streaming_table(
    name="late_events",
    comment="Events not applied because they arrived too late; one row per such delivery.",
)


@dp.append_flow(target="late_events", name="late_player_rewards")
def late_player_rewards():
    return late_events(spark.readStream.table("checked_player_rewards"), rewards.max_event_age,
                       applied=spark.read.table("player_xp_ledger"),
                       source_topic=rewards.name)
