"""A shared SQLite file set up once: owner-only, in WAL mode, with its tables."""

from __future__ import annotations

import errno
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


LOCK_SUFFIX = ".setup.lock"  # beside the database: the flock of its set-up


@contextmanager
def setting_up(path: str) -> Iterator[None]:
    """Hold an exclusive flock while the SQLite file at ``path`` is set up (created 0600
    if missing): one process at a time, the others wait.

    The flock is on a file of its own beside the database (``LOCK_SUFFIX``), never on the
    database: closing any descriptor of a file drops every POSIX lock the process holds
    on it, SQLite's own too, so a connection this process already has open (a second
    Archive on the same file, a migration on the store's connection) would lose its
    shared lock, and another process closing its last connection would then fold and
    delete the WAL and its index under it (lost commits, "disk I/O error", "database disk
    image is malformed"). The database itself is created here only when missing, when no
    connection can have it open.
    """
    fd = os.open(path + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not os.path.exists(path):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
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


FULL_BELOW = 1 << 20  # bytes free under which a SQLite file's disk counts as full


def disk_full(exc: BaseException, files: dict[str, str | None]) -> str | None:
    """What to say when ``exc`` is a write that failed for want of space under one of
    ``files`` (what -> SQLite path; None for a MariaDB one), naming it and its free
    space; None for any other error. SQLite says "database or disk is full" (SQLITE_FULL)
    mid-write, but "disk I/O error" when the disk is so full it cannot even create a
    file's shared-memory index, so that one counts only where a disk is nearly full.

        files {"archive": "/srv/a.sqlite"} on a full disk -> "the archive /srv/a.sqlite:
        its disk is full (0 bytes free on /srv): database or disk is full"
    """
    name = getattr(exc, "sqlite_errorname", "")
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        sure = True
    elif isinstance(exc, sqlite3.OperationalError) and name == "SQLITE_FULL":
        sure = True
    elif isinstance(exc, sqlite3.OperationalError) and name.startswith("SQLITE_IOERR"):
        sure = False
    else:
        return None
    free = {what: _free(path) for what, path in files.items()
            if path is not None and path != ":memory:"}
    low = [what for what, left in free.items() if left is not None and left < FULL_BELOW]
    if not low and not sure:
        return None
    named = "; ".join(f"the {what} {files[what]}: its disk is full ({_bytes(free[what])} free"
                      f" on {_mount(files[what] or '')})" for what in (low or free))
    return f"{named}: {' '.join(str(exc).split())}"


def _free(path: str) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem of ``path``."""
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _mount(path: str) -> str:
    where = os.path.dirname(os.path.abspath(path))
    while not os.path.ismount(where):
        where = os.path.dirname(where)
    return where


def _bytes(n: int | None) -> str:
    if n is None:
        return "unknown bytes"
    return f"{n} bytes" if n < 1024 else f"{n // 1024} KiB"
