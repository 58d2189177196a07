"""The outbox every report email and chat notice passes through (webapp.mail.outbox), and
what `jobreport watch` told users and did (webapp.watch_records), in one file.

The schema of the last release before Alembic, whose code created these tables itself
when missing: IF NOT EXISTS lets a file it made (with all of them, or some) come up to
this revision with every row where it was.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import DOUBLE, INT, LONG_BLOB, MYSQL_TABLE, TEXT, key

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", INT, primary_key=True),
        sa.Column("key", key(255), nullable=False, unique=True),  # job id + kind: once
        sa.Column("job_id", TEXT, nullable=False),
        sa.Column("kind", TEXT, nullable=False),
        sa.Column("from_addr", TEXT, nullable=False),
        sa.Column("to_addr", TEXT, nullable=False),
        sa.Column("message_id", TEXT, nullable=False),
        sa.Column("message", LONG_BLOB, nullable=False),  # the whole RFC 5322 message
        sa.Column("status", key(16), nullable=False, server_default=sa.text("'pending'")),
        sa.Column("attempts", INT, nullable=False, server_default=sa.text("0")),
        sa.Column("next_attempt_at", DOUBLE, nullable=False),
        sa.Column("last_error", TEXT),
        sa.Column("created_at", DOUBLE, nullable=False),
        sa.Column("sent_at", DOUBLE),
        sa.CheckConstraint("status IN ('pending', 'sending', 'sent', 'failed')"),
        if_not_exists=True,
        **MYSQL_TABLE,
    )
    op.create_index("outbox_due", "outbox", ["status", "next_attempt_at"], if_not_exists=True)
    op.create_table(
        "watch_alerts",
        sa.Column("key", key(255), primary_key=True),  # the alert email's outbox key
        sa.Column("cluster", TEXT, nullable=False),
        sa.Column("user", key(64), nullable=False),
        sa.Column("job_id", TEXT, nullable=False),
        sa.Column("rule", TEXT, nullable=False),
        sa.Column("created_at", DOUBLE, nullable=False),
        if_not_exists=True,
        **MYSQL_TABLE,
    )
    op.create_index("watch_alerts_user", "watch_alerts", ["user", "created_at"],
                    if_not_exists=True)
    op.create_table(
        "watch_cancellations",
        sa.Column("key", key(255), primary_key=True),
        sa.Column("cluster", TEXT, nullable=False),
        sa.Column("user", TEXT, nullable=False),
        sa.Column("account", TEXT, nullable=False),
        sa.Column("partition", TEXT, nullable=False),
        sa.Column("job_id", TEXT, nullable=False),
        sa.Column("rule", TEXT, nullable=False),
        sa.Column("evidence", TEXT, nullable=False),  # JSON list of [label, value] rows
        sa.Column("outcome", TEXT, nullable=False),  # "cancelled" or scancel's error
        sa.Column("cancelled_at", DOUBLE, nullable=False),
        if_not_exists=True,
        **MYSQL_TABLE,
    )


def downgrade() -> None:
    op.drop_table("watch_cancellations")
    op.drop_table("watch_alerts")
    op.drop_table("outbox")
