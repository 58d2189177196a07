"""The archive's schema, as numbered migrations applied in order when an archive opens.

Each migration is a tuple of statements per dialect. Never edit a released migration:
add the next number. ``schema_version`` holds the number of the last one applied.
"""

from __future__ import annotations

# version -> {"sqlite": (...), "mysql": (...)}
MIGRATIONS: dict[int, dict[str, tuple[str, ...]]] = {
    1: {
        "sqlite": (
            "CREATE TABLE archive_jobs (cluster TEXT NOT NULL, job_id TEXT NOT NULL,"
            " submit_time INTEGER NOT NULL, end_time INTEGER NOT NULL, user_name TEXT,"
            " state TEXT, resolution REAL, summary TEXT NOT NULL, series TEXT NOT NULL,"
            " archived_at REAL NOT NULL, PRIMARY KEY (cluster, job_id, submit_time))",
            "CREATE INDEX archive_jobs_end ON archive_jobs (cluster, end_time)",
            "CREATE INDEX archive_jobs_user ON archive_jobs (cluster, user_name, end_time)",
            "CREATE TABLE sync_log (cluster TEXT NOT NULL, stream TEXT NOT NULL,"
            " job_id TEXT NOT NULL, submit_time INTEGER NOT NULL, end_time INTEGER NOT NULL,"
            " outcome TEXT NOT NULL, at REAL NOT NULL,"
            " PRIMARY KEY (cluster, stream, job_id, submit_time))",
            "CREATE INDEX sync_log_end ON sync_log (cluster, stream, end_time)",
            "CREATE TABLE sync_watermarks (cluster TEXT NOT NULL, stream TEXT NOT NULL,"
            " end_time INTEGER NOT NULL, updated_at REAL NOT NULL,"
            " PRIMARY KEY (cluster, stream))",
        ),
        "mysql": (
            "CREATE TABLE archive_jobs (cluster VARCHAR(64) NOT NULL,"
            " job_id VARCHAR(32) NOT NULL, submit_time BIGINT NOT NULL,"
            " end_time BIGINT NOT NULL, user_name VARCHAR(64), state VARCHAR(32),"
            " resolution DOUBLE, summary LONGTEXT NOT NULL, series LONGTEXT NOT NULL,"
            " archived_at DOUBLE NOT NULL, PRIMARY KEY (cluster, job_id, submit_time),"
            " KEY archive_jobs_end (cluster, end_time),"
            " KEY archive_jobs_user (cluster, user_name, end_time))"
            " CHARACTER SET utf8mb4",
            "CREATE TABLE sync_log (cluster VARCHAR(64) NOT NULL, stream VARCHAR(16) NOT NULL,"
            " job_id VARCHAR(32) NOT NULL, submit_time BIGINT NOT NULL,"
            " end_time BIGINT NOT NULL, outcome VARCHAR(32) NOT NULL, at DOUBLE NOT NULL,"
            " PRIMARY KEY (cluster, stream, job_id, submit_time),"
            " KEY sync_log_end (cluster, stream, end_time)) CHARACTER SET utf8mb4",
            "CREATE TABLE sync_watermarks (cluster VARCHAR(64) NOT NULL,"
            " stream VARCHAR(16) NOT NULL, end_time BIGINT NOT NULL,"
            " updated_at DOUBLE NOT NULL, PRIMARY KEY (cluster, stream))"
            " CHARACTER SET utf8mb4",
        ),
    },
    # Emails by policy: users who opted out (by the signed link or a staff command), and
    # each job's email decision (sent, or folded into the digest by the daily cap).
    2: {
        "sqlite": (
            "CREATE TABLE mail_opt_out (cluster TEXT NOT NULL, user_name TEXT NOT NULL,"
            " at REAL NOT NULL, by_whom TEXT NOT NULL, PRIMARY KEY (cluster, user_name))",
            "CREATE TABLE mail_log (cluster TEXT NOT NULL, job_id TEXT NOT NULL,"
            " submit_time INTEGER NOT NULL, user_name TEXT NOT NULL, day TEXT NOT NULL,"
            " kind TEXT NOT NULL, at REAL NOT NULL,"
            " PRIMARY KEY (cluster, job_id, submit_time))",
            "CREATE INDEX mail_log_user ON mail_log (cluster, user_name, day)",
        ),
        "mysql": (
            "CREATE TABLE mail_opt_out (cluster VARCHAR(64) NOT NULL,"
            " user_name VARCHAR(64) NOT NULL, at DOUBLE NOT NULL,"
            " by_whom VARCHAR(64) NOT NULL, PRIMARY KEY (cluster, user_name))"
            " CHARACTER SET utf8mb4",
            "CREATE TABLE mail_log (cluster VARCHAR(64) NOT NULL, job_id VARCHAR(32) NOT NULL,"
            " submit_time BIGINT NOT NULL, user_name VARCHAR(64) NOT NULL,"
            " day CHAR(10) NOT NULL, kind VARCHAR(16) NOT NULL, at DOUBLE NOT NULL,"
            " PRIMARY KEY (cluster, job_id, submit_time),"
            " KEY mail_log_user (cluster, user_name, day)) CHARACTER SET utf8mb4",
        ),
    },
    # Jobs the sync failed on and retries (webapp.sync.run): attempts so far, since when.
    3: {
        "sqlite": (
            "CREATE TABLE sync_failures (cluster TEXT NOT NULL, stream TEXT NOT NULL,"
            " job_id TEXT NOT NULL, submit_time INTEGER NOT NULL, end_time INTEGER NOT NULL,"
            " attempts INTEGER NOT NULL, first_at REAL NOT NULL, last_at REAL NOT NULL,"
            " error TEXT NOT NULL, PRIMARY KEY (cluster, stream, job_id, submit_time))",
        ),
        "mysql": (
            "CREATE TABLE sync_failures (cluster VARCHAR(64) NOT NULL,"
            " stream VARCHAR(16) NOT NULL, job_id VARCHAR(32) NOT NULL,"
            " submit_time BIGINT NOT NULL, end_time BIGINT NOT NULL, attempts INT NOT NULL,"
            " first_at DOUBLE NOT NULL, last_at DOUBLE NOT NULL, error TEXT NOT NULL,"
            " PRIMARY KEY (cluster, stream, job_id, submit_time)) CHARACTER SET utf8mb4",
        ),
    },
}

LATEST = max(MIGRATIONS)
