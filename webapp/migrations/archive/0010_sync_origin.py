"""Where each sync stream began (``sync_watermarks.origin``): the look-back
(JOBREPORT_SYNC_LOOKBACK) never reaches before it, so a new archive started ``--max-span``
back does not sweep up the hours of accounting before its first run. A stream of an
earlier release begins at the oldest end its sync log holds (none: its next run sets it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.add_column("sync_watermarks", sa.Column("origin", BIG))
    op.execute("UPDATE sync_watermarks SET origin = (SELECT MIN(l.end_time) FROM sync_log l"
               " WHERE l.cluster = sync_watermarks.cluster"
               " AND l.stream = sync_watermarks.stream)")


def downgrade() -> None:
    with op.batch_alter_table("sync_watermarks") as batch:
        batch.drop_column("origin")
