-- The views the report service reads. SQL SECURITY DEFINER: they run with the definer's
-- rights, so the reader needs no grant on slurm_acct_db at all.
CREATE OR REPLACE DEFINER = 'jobreport_definer'@'localhost' SQL SECURITY DEFINER
VIEW jobreport.jobs AS
{branches};

CREATE OR REPLACE DEFINER = 'jobreport_definer'@'localhost' SQL SECURITY DEFINER
VIEW jobreport.tres AS
SELECT t.id AS id, t.type AS type, t.name AS name FROM `{acct_db}`.`tres_table` AS t
WHERE t.deleted = 0;

CREATE OR REPLACE DEFINER = 'jobreport_definer'@'localhost' SQL SECURITY DEFINER
VIEW jobreport.node_events AS
{event_branches};
