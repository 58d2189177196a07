"""The record of what `jobreport watch` told users and did: alerts and cancellations.

Kept in the outbox's SQLite file (``JOBREPORT_OUTBOX``), in tables of their own, so the
alerts a user got (date, rule, job) outlive the emails' delivery state: the staff report
and the user page count them ("3rd notice in 30 days"). Keys are those of the outbox
rows, so recording twice is a no-op.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jobreport_common.sqlite_file import prepare
from webapp.migrations import OUTBOX, ready


@dataclass(frozen=True)
class AlertRecord:
    user: str
    job_id: str
    rule: str
    created_at: float


@dataclass(frozen=True)
class Cancellation:
    user: str
    account: str
    partition: str
    job_id: str
    rule: str
    evidence: tuple[tuple[str, str], ...]
    outcome: str
    cancelled_at: float


def ordinal(n: int) -> str:
    """1 -> 1st, 2 -> 2nd, 11 -> 11th, 23 -> 23rd."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class AlertLog:
    """Alerts and cancellations in the outbox's SQLite file (created 0600, like it)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        prepare(path)
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            ready(OUTBOX, self.db, "sqlite", path)  # its tables: webapp/migrations/outbox
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def record_alert(self, key: str, cluster: str, user: str, job_id: str, rule: str) -> bool:
        """False when this alert was recorded before."""
        cur = self.db.execute(
            "INSERT OR IGNORE INTO watch_alerts (key, cluster, user, job_id, rule, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)", (key, cluster, user, job_id, rule, self.clock()))
        return cur.rowcount == 1

    def alerts(self, since: float, user: str | None = None) -> list[AlertRecord]:
        """Alerts recorded at or after ``since`` (one user's, or everybody's), oldest first."""
        sql = "SELECT user, job_id, rule, created_at FROM watch_alerts WHERE created_at >= ?"
        params: tuple[float | str, ...] = (since,)
        if user is not None:
            sql += " AND user = ?"
            params += (user,)
        return [AlertRecord(*r) for r in self.db.execute(sql + " ORDER BY created_at", params)]

    def per_user(self, since: float) -> Mapping[str, list[AlertRecord]]:
        out: dict[str, list[AlertRecord]] = {}
        for a in self.alerts(since):
            out.setdefault(a.user, []).append(a)
        return out

    def record_cancellation(self, key: str, cluster: str, c: Cancellation) -> bool:
        cur = self.db.execute(
            "INSERT OR IGNORE INTO watch_cancellations (key, cluster, user, account, partition,"
            " job_id, rule, evidence, outcome, cancelled_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (key, cluster, c.user, c.account, c.partition, c.job_id, c.rule,
             json.dumps([list(r) for r in c.evidence]), c.outcome, c.cancelled_at))
        return cur.rowcount == 1

    def cancelled(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM watch_cancellations WHERE key = ?",
                               (key,)).fetchone() is not None

    def cancellations(self, since: float) -> list[Cancellation]:
        rows = self.db.execute(
            "SELECT user, account, partition, job_id, rule, evidence, outcome, cancelled_at"
            " FROM watch_cancellations WHERE cancelled_at >= ? ORDER BY cancelled_at", (since,))
        return [Cancellation(u, a, p, j, r, tuple(tuple(e) for e in json.loads(ev)), o, t)
                for u, a, p, j, r, ev, o, t in rows]
