"""What the web app's workers share (webapp.web.state): sessions ended before their time
(logout) and the login rate limiter's counters (webapp.web.ratelimit).

The schema of the last release before Alembic, whose code created these tables itself
when missing: IF NOT EXISTS lets a file it made come up to this revision as it is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import DOUBLE, INT, MYSQL_TABLE, key

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "ended_sessions",
        sa.Column("sid", key(255), primary_key=True),
        sa.Column("until", DOUBLE, nullable=False),
        if_not_exists=True,
        **MYSQL_TABLE,
    )
    op.create_table(
        "counters",
        sa.Column("key", key(255), primary_key=True),
        sa.Column("value", INT, nullable=False),
        sa.Column("expires", DOUBLE, nullable=False),
        if_not_exists=True,
        **MYSQL_TABLE,
    )


def downgrade() -> None:
    op.drop_table("counters")
    op.drop_table("ended_sessions")
