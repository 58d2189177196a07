"""The digest line's unused memory named for what it holds: GiB-hours (2**30 bytes x
hours), not GB-hours; the figure itself is unchanged (webapp.archive.digest_rows)."""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"

# RENAME COLUMN: SQLite since 3.25, MariaDB since 10.5 (Debian 12: 3.40 and 10.11); in
# place on both, no table copy, and printable by `jobreport db-upgrade --sql`.
RENAME = "ALTER TABLE archive_digest_jobs RENAME COLUMN {old} TO {new}"


def upgrade() -> None:
    op.execute(RENAME.format(old="memory_gb_hours", new="memory_gib_hours"))


def downgrade() -> None:
    op.execute(RENAME.format(old="memory_gib_hours", new="memory_gb_hours"))
