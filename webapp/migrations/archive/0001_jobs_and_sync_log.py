"""Archived jobs (summary and downsampled series) and the sync's log and watermarks.

Keys are (cluster, job id, submit time): Slurm reuses job ids after a controller reset.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG, DOUBLE, LONG_TEXT, MYSQL_TABLE, key

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "archive_jobs",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("job_id", key(32), nullable=False),
        sa.Column("submit_time", BIG, nullable=False),
        sa.Column("end_time", BIG, nullable=False),
        sa.Column("user_name", key(64)),
        sa.Column("state", key(32)),
        sa.Column("resolution", DOUBLE),
        sa.Column("summary", LONG_TEXT, nullable=False),
        sa.Column("series", LONG_TEXT, nullable=False),
        sa.Column("archived_at", DOUBLE, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "job_id", "submit_time"),
        **MYSQL_TABLE,
    )
    op.create_index("archive_jobs_end", "archive_jobs", ["cluster", "end_time"])
    op.create_index("archive_jobs_user", "archive_jobs", ["cluster", "user_name", "end_time"])
    op.create_table(
        "sync_log",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("stream", key(16), nullable=False),
        sa.Column("job_id", key(32), nullable=False),
        sa.Column("submit_time", BIG, nullable=False),
        sa.Column("end_time", BIG, nullable=False),
        sa.Column("outcome", key(32), nullable=False),
        sa.Column("at", DOUBLE, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "stream", "job_id", "submit_time"),
        **MYSQL_TABLE,
    )
    op.create_index("sync_log_end", "sync_log", ["cluster", "stream", "end_time"])
    op.create_table(
        "sync_watermarks",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("stream", key(16), nullable=False),
        sa.Column("end_time", BIG, nullable=False),
        sa.Column("updated_at", DOUBLE, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "stream"),
        **MYSQL_TABLE,
    )


def downgrade() -> None:
    op.drop_table("sync_watermarks")
    op.drop_table("sync_log")
    op.drop_table("archive_jobs")
