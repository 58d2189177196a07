"""The window's GPU jobs and multi-node jobs, each an index of their own (SQLite's partial
indexes): four of the staff report's per-job tables (smaller GPU, MIG fit, fragmentation,
idle nodes) read only those rows, not the whole window (340 of its 1,600 ms at 700,000
jobs). MariaDB has no partial index and gets none: those tables scan the window there."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"

# The staff report's queries say exactly these (``staff.archived``): SQLite uses a partial
# index only for a query whose WHERE holds its condition.
PARTIAL = {"archive_staff_gpu": "gpus > 0", "archive_staff_multinode": "node_count >= 2"}


def upgrade() -> None:
    if op.get_context().dialect.name != "sqlite":
        return
    for name, where in PARTIAL.items():
        op.create_index(name, "archive_staff_jobs", ["cluster", "end_time"],
                        sqlite_where=sa.text(where))


def downgrade() -> None:
    if op.get_context().dialect.name != "sqlite":
        return
    for name in PARTIAL:
        op.drop_index(name, table_name="archive_staff_jobs")
