"""Jobs the sync failed on and retries (webapp.sync.run): attempts so far, since when."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG, DOUBLE, INT, MYSQL_TABLE, TEXT, key

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "sync_failures",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("stream", key(16), nullable=False),
        sa.Column("job_id", key(32), nullable=False),
        sa.Column("submit_time", BIG, nullable=False),
        sa.Column("end_time", BIG, nullable=False),
        sa.Column("attempts", INT, nullable=False),
        sa.Column("first_at", DOUBLE, nullable=False),
        sa.Column("last_at", DOUBLE, nullable=False),
        sa.Column("error", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "stream", "job_id", "submit_time"),
        **MYSQL_TABLE,
    )


def downgrade() -> None:
    op.drop_table("sync_failures")
