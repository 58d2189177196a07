"""The staff report's figures per ended job, one narrow row each, so a week of a large
site is ranked by GROUP BY / ORDER BY ... LIMIT in the database (webapp.archive.
staff_rows), not read into memory."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG, DOUBLE, INT, LONG_TEXT, MYSQL_TABLE, TEXT, key

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "archive_staff_jobs",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("job_id", key(32), nullable=False),
        sa.Column("submit_time", BIG, nullable=False),
        sa.Column("end_time", BIG, nullable=False),
        sa.Column("raw_id", key(32), nullable=False),
        sa.Column("user_name", key(64), nullable=False),
        sa.Column("account", key(64), nullable=False),
        sa.Column("partition_name", key(64), nullable=False),
        sa.Column("state", key(32), nullable=False),
        sa.Column("submit", DOUBLE),
        sa.Column("start_time", DOUBLE),
        sa.Column("end_at", DOUBLE),
        sa.Column("elapsed", DOUBLE, nullable=False),
        sa.Column("time_limit", DOUBLE),
        sa.Column("cpus", INT, nullable=False),
        sa.Column("node_count", INT, nullable=False),
        sa.Column("nodes", LONG_TEXT, nullable=False),
        sa.Column("memory_requested", BIG),
        sa.Column("gpus", INT, nullable=False),
        sa.Column("cpu_seconds", DOUBLE),
        sa.Column("memory_peak", BIG),
        sa.Column("gpu_utilization", DOUBLE),
        sa.Column("gpu_memory_used", DOUBLE),
        sa.Column("gpu_memory_total", DOUBLE),
        sa.Column("node_cpu", LONG_TEXT),
        sa.Column("pending_reasons", TEXT),
        sa.Column("energy_joules", DOUBLE),
        sa.PrimaryKeyConstraint("cluster", "job_id", "submit_time"),
        **MYSQL_TABLE,
    )
    op.create_index("archive_staff_end", "archive_staff_jobs", ["cluster", "end_time"])
    op.create_index("archive_staff_user", "archive_staff_jobs",
                    ["cluster", "user_name", "end_time"])


def downgrade() -> None:
    op.drop_table("archive_staff_jobs")
