-- Repeated once per cluster: what the definer may read.
GRANT SELECT ON `{acct_db}`.`{cluster}_job_table` TO 'jobreport_definer'@'localhost';
GRANT SELECT ON `{acct_db}`.`{cluster}_assoc_table` TO 'jobreport_definer'@'localhost';
GRANT SELECT ON `{acct_db}`.`{cluster}_event_table` TO 'jobreport_definer'@'localhost';
GRANT SELECT ON `{acct_db}`.`tres_table` TO 'jobreport_definer'@'localhost';
GRANT SELECT ON `{acct_db}`.`qos_table` TO 'jobreport_definer'@'localhost';
