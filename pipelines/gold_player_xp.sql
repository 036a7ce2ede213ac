-- Gold player XP: total XP per player, from the ledger where each XP grant is once.
--
-- A plain GROUP BY of sums, counts and a max over one Delta table: a shape Databricks can
-- refresh incrementally (the ledger has row tracking).
CREATE OR REFRESH MATERIALIZED VIEW player_xp
COMMENT 'Total XP per player; each event_id counts once.'
AS SELECT
  player_id,
  CAST(SUM(xp) AS BIGINT) AS total_xp,
  COUNT(*) AS xp_events,
  MAX(occurred_at) AS last_granted_at
FROM player_xp_ledger
GROUP BY player_id;
