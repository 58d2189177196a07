"""Each staff row's memory as the report judged it node by node: the bytes of its request
it used (``unused.memory_used_bytes``: a het job's big component and a node of an uneven
``--mem-per-cpu`` job each against its own request) and its memory efficiency (the
judged node's peak over its own request). Rows of an earlier release keep NULL there and
are read as before: the busiest node's peak x nodes, over the request per node."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG, DOUBLE

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.add_column("archive_staff_jobs", sa.Column("memory_used", BIG))
    op.add_column("archive_staff_jobs", sa.Column("memory_efficiency", DOUBLE))


def downgrade() -> None:
    with op.batch_alter_table("archive_staff_jobs") as batch:
        batch.drop_column("memory_efficiency")
        batch.drop_column("memory_used")
