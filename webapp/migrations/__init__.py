"""The schema of jobreport's own databases, changed only by the Alembic revisions here.

Three targets, each a linear history in a folder of its own, on SQLite or MariaDB:

    archive/    the archive (JOBREPORT_ARCHIVE_URL): archived jobs, the sync's log and
                watermarks, mail decisions and opt-outs, the staff report's rows
    outbox/     the outbox file (JOBREPORT_OUTBOX): queued emails, watch alerts and
                cancellations
    web_state/  the web app's shared file (JOBREPORT_WEB_STATE): ended sessions, login
                counters

A revision is ``NNNN_what.py`` with revision id ``NNNN``, written once in SQLAlchemy Core
for both databases; never edit a released one, add the next number. ``jobreport
db-upgrade`` runs them (``webapp.migrations.upgrade``). Opening a store checks its
database here: a new, empty one is created at the head revision (there is nothing to
keep); one at an older revision, or made before Alembic, is refused with
``SchemaOutdated`` naming the command. ``revision`` reads where a database stands with
plain SQL on the store's own connection, so opening a store never imports Alembic.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Mapping
from typing import Any

from jobreport_common.mysql_url import mysql_params
from jobreport_common.redact import redact_url
from jobreport_common.sqlite_file import prepare, sqlite_path
from webapp.migrations.revision import (
    ARCHIVE,
    COMMAND,
    HERE,
    OUTBOX,
    TARGETS,
    WEB_STATE,
    SchemaOutdated,
    State,
    Target,
    head,
    migrating,
    newer,
    refusal,
    state,
)
from webapp.settings import Settings

__all__ = ["ARCHIVE", "COMMAND", "HERE", "OUTBOX", "TARGETS", "WEB_STATE", "SchemaOutdated",
           "State", "Target", "check", "check_all", "connect", "head", "locations", "newer",
           "ready", "refusal", "state"]

log = logging.getLogger(__name__)


def settled(target: Target, conn: Any, dialect: str) -> State:
    """Where the database on ``conn`` stands once no other process is creating or
    upgrading it. Found neither at the head nor empty, it may be another process's work
    under way (its tables made, no revision yet: a second gunicorn worker starting in run
    6 of 2026-12-06, six processes opening one new web state in run bd of 2026-12-07):
    that process holds ``migrating`` until it is done, so look again once it is free."""
    found = state(target, conn, dialect)
    if found.revision != head(target) and not found.empty:
        with migrating(target, conn, dialect):
            found = state(target, conn, dialect)
    return found


def ready(target: Target, conn: Any, dialect: str, where: str) -> None:
    """Open-time check of a store's database on its own connection: create a new, empty
    one at the head revision (one process at a time); refuse any other that is not at
    the head (SchemaOutdated)."""
    found = settled(target, conn, dialect)
    if found.revision == head(target):
        return
    if found.empty:
        from webapp.migrations.upgrade import run  # Alembic: only to create one

        _, found = run(target, conn, dialect, where)  # under the lock, found again there
        if found.revision == head(target):
            return
    raise SchemaOutdated(refusal(target, where, found))


def check(target: Target, where: str) -> None:
    """The start check of the sync and the web app, on a connection of its own and
    changing nothing: a SQLite file not there yet, or a new, empty database, passes (the
    store creates it); a MariaDB server out of reach is logged and passes (the store
    reports it when used); anything else not at the head raises SchemaOutdated."""
    path = sqlite_path(where)
    if path is not None and (path == ":memory:" or not os.path.exists(path)):
        return
    try:
        conn, dialect = connect(where, create=False)
    except OSError as exc:
        log.warning("%s: cannot check the schema now: %s", target.what, exc)
        return
    try:
        found = settled(target, conn, dialect)
    finally:
        conn.close()
    if found.revision != head(target) and not found.empty:
        raise SchemaOutdated(refusal(target, where, found))


def locations(settings: Settings) -> dict[Target, str]:
    """Where ``settings`` keep each target."""
    return {ARCHIVE: settings.archive_url, OUTBOX: settings.outbox,
            WEB_STATE: settings.web_state}


def check_all(where: Mapping[Target, str]) -> None:
    """``check`` each target at its location (``locations``)."""
    for target, location in where.items():
        check(target, location)


def connect(where: str, create: bool = True, timeout: float = 30.0) -> tuple[Any, str]:
    """A DB-API connection in autocommit mode to the SQLite file or MariaDB database
    ``where`` names, and its dialect. A SQLite file is created (0600, WAL) when ``create``;
    a MariaDB server out of reach (or refusing the login) raises OSError."""
    path = sqlite_path(where)
    if path is not None:
        if create and path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
            prepare(path, timeout=timeout)
        return sqlite3.connect(path, timeout=timeout, isolation_level=None), "sqlite"
    import pymysql

    try:
        conn = pymysql.connect(**mysql_params(where, "jobreport_archive"), autocommit=True,
                               connect_timeout=int(timeout), charset="utf8mb4")
    except pymysql.OperationalError as exc:
        raise OSError(redact_url(str(exc))) from None
    return conn, "mysql"
