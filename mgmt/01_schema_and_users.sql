-- jobreport: schema and accounts. Idempotent.
-- {reader_password} is quoted by the db-setup command; identifiers are validated by it.
CREATE DATABASE IF NOT EXISTS jobreport;

-- Owns the views: a locked account nobody logs in as; it can read only the tables the
-- views need (never <cluster>_job_script_table or <cluster>_job_env_table: they hold secrets).
CREATE USER IF NOT EXISTS 'jobreport_definer'@'localhost' ACCOUNT LOCK;
-- Locked again on every run: an account created by hand, or unlocked since, is closed.
ALTER USER 'jobreport_definer'@'localhost' ACCOUNT LOCK;

-- The report service logs in as this user; it may SELECT the views and nothing else.
CREATE USER IF NOT EXISTS 'jobreport'@'{reader_host}' IDENTIFIED BY {reader_password};
ALTER USER 'jobreport'@'{reader_host}' IDENTIFIED BY {reader_password};
