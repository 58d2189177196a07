"""A shared SQLite file set up once: owner-only, in WAL mode, with its tables."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


def sqlite_path(url: str) -> str | None:
    """The file of ``sqlite:///abs/path``, ``sqlite:rel/path`` or a bare path; None for
    ``mysql://``."""
    if url.startswith(("mysql://", "mariadb://")):
        return None
    if url.startswith("sqlite://"):
        return url[len("sqlite://"):] or ":memory:"
    if url.startswith("sqlite:"):
        return url[len("sqlite:"):]
    return url


@contextmanager
def setting_up(path: str) -> Iterator[None]:
    """Hold an exclusive flock on the file at ``path`` (created 0600 if missing) while it
    is set up: one process at a time, the others wait."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def prepare(path: str, schema: str = "", timeout: float = 30.0) -> None:
    """Create ``path`` (0600) if missing, switch it to WAL and run ``schema``.

    Processes starting together (gunicorn workers, a timer beside the web app) would race
    to switch a new file to WAL, and SQLite answers that race "database is locked" at once
    instead of waiting; an flock, apart from SQLite's own fcntl locks, lets one process set
    the file up at a time. WAL is a property of the file, so later connections inherit it.
    """
    with setting_up(path):
        db = sqlite3.connect(path, timeout=timeout)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
            if schema:
                db.executescript(schema)
        finally:
            db.close()
