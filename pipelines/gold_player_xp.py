"""Gold player XP: total XP per player, from the ledger where each XP grant is once."""

from pyspark import pipelines as dp

from exactly_once.transforms.gold import player_xp_totals


@dp.materialized_view(name="player_xp", comment="Total XP per player; each event_id counts once.")
def player_xp():
    return player_xp_totals(spark.read.table("player_xp_ledger"))
