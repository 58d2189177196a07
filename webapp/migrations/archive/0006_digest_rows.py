"""The weekly digest's line of each archived job, one narrow row each (webapp.archive.
digest_rows): written beside the archived report, so a week's digests read ~100 bytes a
job instead of extracting figures from each 3-9 KB summary. Jobs archived before this
revision get theirs the first time a digest covers them."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG, DOUBLE, MYSQL_TABLE, TEXT, key

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_table(
        "archive_digest_jobs",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("job_id", key(32), nullable=False),
        sa.Column("submit_time", BIG, nullable=False),
        sa.Column("end_time", BIG, nullable=False),
        sa.Column("user_name", key(64)),
        sa.Column("state", key(32)),
        sa.Column("job_name", TEXT),
        sa.Column("account", key(64)),
        sa.Column("elapsed", DOUBLE),
        sa.Column("cpu_hours", DOUBLE, nullable=False),
        sa.Column("gpu_hours", DOUBLE, nullable=False),
        sa.Column("memory_gb_hours", DOUBLE, nullable=False),
        sa.Column("energy_kwh", DOUBLE),
        sa.Column("findings", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "job_id", "submit_time"),
        **MYSQL_TABLE,
    )
    op.create_index("archive_digest_end", "archive_digest_jobs", ["cluster", "end_time"])
    op.create_index("archive_digest_user", "archive_digest_jobs",
                    ["cluster", "user_name", "end_time"])


def downgrade() -> None:
    op.drop_table("archive_digest_jobs")
