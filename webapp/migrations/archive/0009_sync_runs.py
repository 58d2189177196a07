"""What a site watches of the sync (`jobreport sync --status`, its metrics): the last
run of each cluster and stream (when, from which source, what it did, why it stopped);
when a run first met slurmdbd's stand-in record of a job (the wait for its start record
counts from then: a job whose end arrived late is met long after its end); the given-up
jobs of the sync log found by an index, not a scan of its years of rows."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrations.columns import BIG, DOUBLE, INT, MYSQL_TABLE, TEXT, key

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.create_table(
        "sync_runs",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("stream", key(16), nullable=False),
        sa.Column("started_at", DOUBLE, nullable=False),
        sa.Column("finished_at", DOUBLE, nullable=False),
        sa.Column("source", key(16), nullable=False),
        sa.Column("selected", INT, nullable=False),
        sa.Column("outcomes", TEXT, nullable=False),  # JSON: outcome -> jobs
        sa.Column("error", TEXT),  # what stopped the run; NULL: it went through
        sa.PrimaryKeyConstraint("cluster", "stream"),
        **MYSQL_TABLE,
    )
    op.create_table(
        "sync_stand_ins",
        sa.Column("cluster", key(64), nullable=False),
        sa.Column("job_id", key(32), nullable=False),
        sa.Column("submit_time", BIG, nullable=False),
        sa.Column("end_time", BIG, nullable=False),
        sa.Column("first_seen", DOUBLE, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "job_id", "submit_time"),
        **MYSQL_TABLE,
    )
    op.create_index("sync_log_outcome", "sync_log", ["cluster", "stream", "outcome", "end_time"])


def downgrade() -> None:
    op.drop_index("sync_log_outcome", table_name="sync_log")
    op.drop_table("sync_stand_ins")
    op.drop_table("sync_runs")
