"""State the web app's worker processes share, in one SQLite file (no extra service).

Two small tables: sessions ended before their time (logout), checked on every request,
and the login-attempt counters of the rate limiter (``webapp.web.ratelimit``). Every
call opens its own connection: gunicorn forks workers and runs threads, and SQLite
connections may cross neither.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jobreport_common.sqlite_file import prepare
from webapp.migrations import WEB_STATE, ready


class WebState:
    """The shared file at ``path``, created (owner-only) with its tables on first use;
    refused when its schema is older than the code's (SchemaOutdated)."""

    def __init__(self, path: str) -> None:
        self.path = str(Path(path).resolve())
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # Owner-only: it names who logged in and from where.
        prepare(self.path, timeout=10)
        db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            ready(WEB_STATE, db, "sqlite", self.path)  # its tables: webapp/migrations/web_state
        finally:
            db.close()

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection in one IMMEDIATE transaction (writers queue instead of failing)."""
        db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            db.close()

    def end_session(self, sid: str, until: float) -> None:
        """Refuse session ``sid`` from now on (its cookie would be valid until ``until``)."""
        with self.connect() as db:
            db.execute("DELETE FROM ended_sessions WHERE until < ?", (time.time(),))
            db.execute("INSERT OR REPLACE INTO ended_sessions VALUES (?, ?)", (sid, until))

    def session_ended(self, sid: str) -> bool:
        db = sqlite3.connect(self.path, timeout=10)
        try:
            row = db.execute("SELECT 1 FROM ended_sessions WHERE sid = ?", (sid,)).fetchone()
        finally:
            db.close()
        return row is not None
