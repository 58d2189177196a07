"""Emails by policy: users who opted out (by the signed link or a staff command), and
each job's email decision (sent, or folded into the digest by the daily cap)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG, DOUBLE, MYSQL_TABLE, fixed, key

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "mail_opt_out",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("user_name", key(64), nullable=False),
        sa.Column("at", DOUBLE, nullable=False),
        sa.Column("by_whom", key(64), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "user_name"),
        **MYSQL_TABLE,
    )
    op.create_table(
        "mail_log",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("job_id", key(32), nullable=False),
        sa.Column("submit_time", BIG, nullable=False),
        sa.Column("user_name", key(64), nullable=False),
        sa.Column("day", fixed(10), nullable=False),
        sa.Column("kind", key(16), nullable=False),
        sa.Column("at", DOUBLE, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "job_id", "submit_time"),
        **MYSQL_TABLE,
    )
    op.create_index("mail_log_user", "mail_log", ["cluster", "user_name", "day"])


def downgrade() -> None:
    op.drop_table("mail_log")
    op.drop_table("mail_opt_out")
