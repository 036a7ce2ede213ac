"""Gold player reference history (SCD2) from the daily `players` export, not from Kafka.

An operational system exports its players table once a day as `players_<YYYY-MM-DD>.csv`
(`exports.players` in conf/). `dp.create_auto_cdc_from_snapshot_flow` compares each export with
the one before, by `player_id`: a new player is inserted, a player missing from the export is
closed, a change of tier or country closes the current version and opens one, a rename updates
the current version in place. `__START_AT` / `__END_AT` are the export dates (DATE).

The version of each snapshot is the date in the export's file name, never the day the pipeline
runs: the table is a pure function of the export files, whenever and however often it runs.
"""

from pyspark import pipelines as dp

from exactly_once.exports.files import next_export, read_export
from exactly_once.settings.pipeline import pipeline_settings

players = pipeline_settings(spark).export("players")


def next_players_export(latest_version):
    """The first export dated after `latest_version` (a date; None before the first) and its
    date, or None when there is none yet."""
    found = next_export(players.path, players.name, latest_version)
    if found is None:
        return None
    day, path = found
    return read_export(spark, path, players.schema), day


dp.create_streaming_table(
    name="players_history",
    comment="History of each player's tier and country from the daily players export "
    "(SCD type 2, versions are export dates); a closed account has no current version.",
)

dp.create_auto_cdc_from_snapshot_flow(
    target="players_history",
    source=next_players_export,
    keys=[players.key],
    stored_as_scd_type=2,
    track_history_column_list=list(players.track_history),
)
