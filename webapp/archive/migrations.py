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
    # The staff report's figures per ended job, one narrow row each, so a week of a large
    # site is ranked by GROUP BY / ORDER BY ... LIMIT in the database (webapp.archive.
    # staff_rows), not read into memory.
    4: {
        "sqlite": (
            "CREATE TABLE archive_staff_jobs (cluster TEXT NOT NULL, job_id TEXT NOT NULL,"
            " submit_time INTEGER NOT NULL, end_time INTEGER NOT NULL, raw_id TEXT NOT NULL,"
            " user_name TEXT NOT NULL, account TEXT NOT NULL, partition_name TEXT NOT NULL,"
            " state TEXT NOT NULL, submit REAL, start_time REAL, end_at REAL,"
            " elapsed REAL NOT NULL, time_limit REAL, cpus INTEGER NOT NULL,"
            " node_count INTEGER NOT NULL, nodes TEXT NOT NULL, memory_requested INTEGER,"
            " gpus INTEGER NOT NULL, cpu_seconds REAL, memory_peak INTEGER,"
            " gpu_utilization REAL, gpu_memory_used REAL, gpu_memory_total REAL,"
            " node_cpu TEXT, pending_reasons TEXT, energy_joules REAL,"
            " PRIMARY KEY (cluster, job_id, submit_time))",
            "CREATE INDEX archive_staff_end ON archive_staff_jobs (cluster, end_time)",
            "CREATE INDEX archive_staff_user ON archive_staff_jobs"
            " (cluster, user_name, end_time)",
        ),
        "mysql": (
            "CREATE TABLE archive_staff_jobs (cluster VARCHAR(64) NOT NULL,"
            " job_id VARCHAR(32) NOT NULL, submit_time BIGINT NOT NULL,"
            " end_time BIGINT NOT NULL, raw_id VARCHAR(32) NOT NULL,"
            " user_name VARCHAR(64) NOT NULL, account VARCHAR(64) NOT NULL,"
            " partition_name VARCHAR(64) NOT NULL, state VARCHAR(32) NOT NULL,"
            " submit DOUBLE, start_time DOUBLE, end_at DOUBLE, elapsed DOUBLE NOT NULL,"
            " time_limit DOUBLE, cpus INT NOT NULL, node_count INT NOT NULL,"
            " nodes LONGTEXT NOT NULL, memory_requested BIGINT, gpus INT NOT NULL,"
            " cpu_seconds DOUBLE, memory_peak BIGINT, gpu_utilization DOUBLE,"
            " gpu_memory_used DOUBLE, gpu_memory_total DOUBLE, node_cpu LONGTEXT,"
            " pending_reasons TEXT, energy_joules DOUBLE,"
            " PRIMARY KEY (cluster, job_id, submit_time),"
            " KEY archive_staff_end (cluster, end_time),"
            " KEY archive_staff_user (cluster, user_name, end_time)) CHARACTER SET utf8mb4",
        ),
    },
    # An account's jobs of a window, paged and ranked by the database (the staff pages,
    # webapp.report.my_jobs), as a user's are by archive_staff_user.
    5: {
        "sqlite": ("CREATE INDEX archive_staff_account ON archive_staff_jobs"
                   " (cluster, account, end_time)",),
        "mysql": ("CREATE INDEX archive_staff_account ON archive_staff_jobs"
                  " (cluster, account, end_time)",),
    },
}

LATEST = max(MIGRATIONS)
