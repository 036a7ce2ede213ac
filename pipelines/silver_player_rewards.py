"""Silver player rewards: parsed, validated XP grants, each event_id once within the watermark."""

from pyspark import pipelines as dp

from exactly_once.config import pipeline_settings
from exactly_once.transforms.silver import deduplicate_events, parse_events, valid_events

rewards = pipeline_settings(spark).topic("player_rewards")


@dp.table(name="silver_player_rewards", comment="Valid XP grants; redeliveries dropped.")
def silver_player_rewards():
    parsed = parse_events(spark.readStream.table("bronze_kafka_events"), rewards)
    return deduplicate_events(valid_events(parsed, rewards), rewards)
