"""Where one of jobreport's databases stands: the targets, their newest revision (read
from the revision files, without Alembic), the revision a database is at (plain SQL on
the store's own DB-API connection) and the lock under which its schema changes."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from jobreport_common.redact import redact_url
from jobreport_common.sqlite_file import setting_up

HERE = os.path.dirname(os.path.abspath(__file__))  # webapp/migrations
COMMAND = "jobreport db-upgrade"


@dataclass(frozen=True)
class Target:
    """One database jobreport keeps: its revisions' folder and what marks it as made by a
    release before Alembic."""

    name: str  # the folder of its revisions
    what: str  # for messages
    setting: str  # the variable that names where it is
    tables: tuple[str, ...]  # the tables of the last release before Alembic
    legacy_version: str | None = None  # that release's own version table (its max = NNNN)

    @property
    def version_table(self) -> str:
        # One per target: a site may keep two targets in one SQLite file or database.
        return f"alembic_version_{self.name}"

    @property
    def versions(self) -> str:
        return os.path.join(HERE, self.name)


ARCHIVE = Target("archive", "the archive", "JOBREPORT_ARCHIVE_URL",
                 ("archive_jobs", "sync_log", "sync_watermarks", "mail_opt_out", "mail_log",
                  "sync_failures", "archive_staff_jobs", "schema_version"),
                 legacy_version="schema_version")
OUTBOX = Target("outbox", "the outbox", "JOBREPORT_OUTBOX",
                ("outbox", "watch_alerts", "watch_cancellations"))
WEB_STATE = Target("web_state", "the web app's state", "JOBREPORT_WEB_STATE",
                   ("ended_sessions", "counters"))
TARGETS = (ARCHIVE, OUTBOX, WEB_STATE)


class SchemaOutdated(RuntimeError):
    """A database's schema is not the one this jobreport's code needs."""


@functools.cache
def head(target: Target) -> str:
    """The newest revision of ``target``: the highest ``NNNN`` of its revision files
    (tests check that Alembic's history agrees)."""
    numbers = [f[:4] for f in os.listdir(target.versions)
               if f.endswith(".py") and f[:4].isdigit()]
    return max(numbers)


@dataclass(frozen=True)
class State:
    """Where a database stands: ``revision`` (None before the first), ``empty`` (none of
    the target's tables: a new database), ``legacy`` (made before Alembic: the revision
    its old version table stands for, or "" when it kept none)."""

    revision: str | None
    empty: bool = False
    legacy: str | None = None

    def describe(self) -> str:
        if self.empty:
            return "new (no tables)"
        if self.legacy is not None:
            return "made before Alembic" + (f" (as revision {self.legacy})" if self.legacy
                                            else "")
        return f"at revision {self.revision}"


Query = Callable[[str], list[tuple[Any, ...]]]


def cursor_query(conn: Any) -> Query:
    def query(sql: str) -> list[tuple[Any, ...]]:
        cur = conn.cursor()
        try:
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()
    return query


def state(target: Target, conn: Any, dialect: str) -> State:
    """Where the database on DB-API connection ``conn`` (``sqlite`` or ``mysql``) stands."""
    query = cursor_query(conn)
    if dialect == "sqlite":
        tables = {r[0] for r in query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    else:
        tables = {r[0] for r in query("SELECT table_name FROM information_schema.tables"
                                      " WHERE table_schema = DATABASE()")}
    if target.version_table in tables:
        rows = query(f"SELECT version_num FROM {target.version_table}")  # noqa: S608
        return State(rows[0][0] if rows else None)
    if not tables & set(target.tables):
        return State(None, empty=True)
    legacy = ""
    if target.legacy_version in tables:
        rows = query(f"SELECT max(version) FROM {target.legacy_version}")  # noqa: S608
        legacy = f"{int(rows[0][0]):04d}" if rows and rows[0][0] else ""
    return State(None, legacy=legacy)


def newer(target: Target, found: State) -> bool:
    """``found`` is a revision after this release's newest (a later jobreport's)."""
    return found.revision is not None and found.revision > head(target)


def refusal(target: Target, where: str, found: State) -> str:
    """Why a store will not open: what it found, and the command that upgrades it."""
    what = f"{target.what} ({target.setting}={redact_url(where)}) is {found.describe()}"
    if newer(target, found):
        return (f"{what}, made by a later jobreport than this one (which knows revisions up"
                f" to {head(target)}): run that release or a later one")
    return f"{what}; this jobreport needs revision {head(target)}: run `{COMMAND}`"


@contextmanager
def migrating(target: Target, conn: Any, dialect: str) -> Iterator[None]:
    """One process changes a database's schema at a time; the others wait, then find the
    work done: MariaDB's GET_LOCK, an flock on a SQLite file (none in memory)."""
    query = cursor_query(conn)
    if dialect == "mysql":
        name = f"jobreport:migrate-{target.name}"
        query(f"SELECT GET_LOCK('{name}', 120)")  # noqa: S608 (a constant)
        try:
            yield
        finally:
            query(f"SELECT RELEASE_LOCK('{name}')")  # noqa: S608
        return
    path = next((r[2] for r in query("PRAGMA database_list") if r[1] == "main"), "")
    if not path:
        yield
        return
    with setting_up(path):
        yield
