-- One UNION ALL branch of jobreport.node_events per cluster: the periods a node was down,
-- drained or failing, with the reason an admin or Slurm gave (the rows without a node are
-- the cluster's own TRES registrations, left out). time_end 0: still so.
SELECT
  '{cluster}' AS cluster,
  e.node_name AS node,
  e.time_start AS start_time,
  NULLIF(e.time_end, 0) AS end_time,
  e.state AS state,
  e.reason AS reason
FROM `{acct_db}`.`{cluster}_event_table` AS e
WHERE e.node_name <> ''
