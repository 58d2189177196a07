"""What the email policy remembers, beside the archive (same database): who opted out,
and what became of each job's email (sent, or folded into the digest by the daily cap).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from webapp.archive.db import Database

REPORT = "report"
FOLDED = "folded"


class MailState:
    """Opt-outs and per-job email decisions, keyed like the archive."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def opt_out(self, cluster: str, user: str, by: str) -> bool:
        """Record that ``user`` wants no more emails; False when already recorded."""
        return self.db.execute(
            f"{self.db.dialect.insert_ignore} INTO mail_opt_out (cluster, user_name, at,"
            " by_whom) VALUES (?, ?, ?, ?)", (cluster, user, self.clock(), by)) == 1

    def opt_in(self, cluster: str, user: str) -> bool:
        return self.db.execute("DELETE FROM mail_opt_out WHERE cluster = ? AND user_name = ?",
                               (cluster, user)) > 0

    def opted_out(self, cluster: str) -> dict[str, tuple[float, str]]:
        """user -> (when, by whom)."""
        rows = self.db.query("SELECT user_name, at, by_whom FROM mail_opt_out"
                             " WHERE cluster = ? ORDER BY user_name", (cluster,))
        return {r[0]: (float(r[1]), r[2]) for r in rows}

    def decision(self, cluster: str, job_id: str, submit_time: int) -> str | None:
        rows = self.db.query("SELECT kind FROM mail_log WHERE cluster = ? AND job_id = ?"
                             " AND submit_time = ?", (cluster, job_id, submit_time))
        return rows[0][0] if rows else None

    def decide(self, cluster: str, job_id: str, submit_time: int, user: str, day: str,
               kind: str) -> bool:
        """Record a job's email decision once; False when one was already recorded."""
        return self.db.execute(
            f"{self.db.dialect.insert_ignore} INTO mail_log (cluster, job_id, submit_time,"
            " user_name, day, kind, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (cluster, job_id, submit_time, user, day, kind, self.clock())) == 1

    def sent_on(self, cluster: str, user: str, day: str) -> int:
        """Report emails decided for ``user`` on ``day`` (UTC, YYYY-MM-DD)."""
        rows = self.db.query("SELECT count(*) FROM mail_log WHERE cluster = ? AND"
                             " user_name = ? AND day = ? AND kind = ?",
                             (cluster, user, day, REPORT))
        return int(rows[0][0])

    def folded(self, cluster: str, user: str) -> set[tuple[str, int]]:
        """(job id, submit time) of the user's jobs the daily cap kept out of email."""
        rows = self.db.query("SELECT job_id, submit_time FROM mail_log WHERE cluster = ?"
                             " AND user_name = ? AND kind = ?", (cluster, user, FOLDED))
        return {(r[0], int(r[1])) for r in rows}
