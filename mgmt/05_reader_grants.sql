GRANT SELECT ON jobreport.jobs TO 'jobreport'@'{reader_host}';
GRANT SELECT ON jobreport.tres TO 'jobreport'@'{reader_host}';
GRANT SELECT ON jobreport.node_events TO 'jobreport'@'{reader_host}';
