"""When a row's last error happened (``last_error_at``): the outbox's state for staff and
its metrics (``webapp.mail.outbox_state``) name the newest error and its time, also after
the row went out on a later attempt. Indexed: the newest is read from the index alone (a
row's message sits before its other columns in the record, so a scan of the table reads
every message)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import DOUBLE

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.add_column("outbox", sa.Column("last_error_at", DOUBLE))
    op.create_index("outbox_last_error", "outbox", ["last_error_at"])


def downgrade() -> None:
    op.drop_index("outbox_last_error", table_name="outbox")
    with op.batch_alter_table("outbox") as batch:  # SQLite drops a column by a table copy
        batch.drop_column("last_error_at")
