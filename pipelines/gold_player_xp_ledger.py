"""Gold XP ledger: one row per XP grant ever applied, keyed by event_id.

This is the processed-messages table of the idempotent-consumer pattern, kept by AUTO CDC:
a redelivery of an applied event_id merges into its existing row (never newer, so ignored),
however late it comes, and long after silver's watermark state has forgotten it. Grants that
the broker received more than `max_event_age` after they happened are not applied:
`late_events` keeps them. Only the event's own fields are stored, not which delivery carried
it, so the table is the same whichever copy came first.
"""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.table_properties import INCREMENTAL_VIEW_SOURCE, KEPT_THROUGH_FULL_REFRESH
from exactly_once.transforms.gold import in_time_grants
from exactly_once.transforms.silver import ARRIVED_LATE, SILVER_ONLY

rewards = pipeline_settings(spark).topic("player_rewards")


@dp.temporary_view(name="xp_grants_in_time", comment="Silver's XP grants within max_event_age.")
def xp_grants_in_time():
    return in_time_grants(spark.readStream.table("silver_player_rewards"))


dp.create_streaming_table(
    name="player_xp_ledger",
    comment="Every applied XP grant once: the processed event IDs and the effect they guard.",
    # The only record of grants older than Kafka's retention: a full refresh must not erase it.
    # `player_xp` sums it: row tracking lets Databricks refresh those totals incrementally.
    table_properties={**KEPT_THROUGH_FULL_REFRESH, **INCREMENTAL_VIEW_SOURCE},
)

dp.create_auto_cdc_flow(
    target="player_xp_ledger",
    source="xp_grants_in_time",
    keys=["event_id"],
    sequence_by=F.struct(*rewards.sequence_by),  # a redelivery repeats it: never newer, so ignored
    except_column_list=[*SILVER_ONLY, ARRIVED_LATE],
    stored_as_scd_type=1,
)
