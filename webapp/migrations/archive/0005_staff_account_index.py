"""An account's jobs of a window, paged and ranked by the database (the staff pages,
webapp.lists.my_jobs), as a user's are by archive_staff_user."""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_index("archive_staff_account", "archive_staff_jobs",
                    ["cluster", "account", "end_time"])


def downgrade() -> None:
    op.drop_index("archive_staff_account", table_name="archive_staff_jobs")
