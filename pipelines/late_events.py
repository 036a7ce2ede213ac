"""Late events: XP grants the broker received more than `max_event_age` after they happened.

Not applied to XP (a person decides), kept once per event_id with the reason, never lost. An
event some delivery of which arrived in time is applied by the ledger instead, so it is not
late: that delivery is a delete here, and it wins over every late one, whatever the order.
"""

from pyspark import pipelines as dp
from pyspark.sql import functions as F

from exactly_once.settings.pipeline import pipeline_settings
from exactly_once.table_properties import KEPT_THROUGH_FULL_REFRESH, TOMBSTONES_KEPT
from exactly_once.transforms.gold import LATE_EVENT_SEQUENCE, late_event_changes

rewards = pipeline_settings(spark).topic("player_rewards")


@dp.temporary_view(name="xp_grant_arrivals", comment="Each XP grant in silver: in time?")
def xp_grant_arrivals():
    return late_event_changes(spark.readStream.table("silver_player_rewards"), rewards)


dp.create_streaming_table(
    name="late_events",
    comment="XP grants not applied because they arrived too late; one row per event.",
    # Grants older than Kafka's retention exist only here; an applied event's tombstone must
    # outlive every late copy of it.
    table_properties={**KEPT_THROUGH_FULL_REFRESH, **TOMBSTONES_KEPT},
)

dp.create_auto_cdc_flow(
    target="late_events",
    source="xp_grant_arrivals",
    keys=["event_id"],
    sequence_by=F.struct(*LATE_EVENT_SEQUENCE),
    apply_as_deletes=F.col("applied"),
    except_column_list=["applied"],
    stored_as_scd_type=1,
)
