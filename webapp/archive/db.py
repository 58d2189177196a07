"""One small database interface over SQLite (sqlite3) and MariaDB (pymysql).

Statements are written once with ``?`` placeholders and the few dialect differences
(insert-if-new, keep-the-larger upsert, the cross-process lock) live in ``Dialect``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from jobreport_common.filelock import held
from jobreport_common.mysql_url import mysql_params
from jobreport_common.sqlite_file import prepare, sqlite_path

IN_CHUNK = 500  # values in one statement's IN (...) list


class ArchiveBusy(RuntimeError):
    """Another process holds the sync lock."""


@dataclass(frozen=True)
class Dialect:
    name: str
    insert_ignore: str
    # keeps the larger end_time (a watermark never moves back) and the first origin
    upsert_watermark: str


_WATERMARK = ("INSERT INTO sync_watermarks (cluster, stream, end_time, updated_at, origin)"
              " VALUES (?, ?, ?, ?, ?) ")
SQLITE = Dialect(
    "sqlite",
    "INSERT OR IGNORE",
    _WATERMARK + "ON CONFLICT (cluster, stream) DO UPDATE SET"
    " end_time = MAX(end_time, excluded.end_time),"
    " updated_at = excluded.updated_at, origin = COALESCE(origin, excluded.origin)",
)
MYSQL = Dialect(
    "mysql",
    "INSERT IGNORE",
    _WATERMARK + "ON DUPLICATE KEY UPDATE end_time = GREATEST(end_time, VALUES(end_time)),"
    " updated_at = VALUES(updated_at), origin = COALESCE(origin, VALUES(origin))",
)


class Database:
    """A connection in autocommit mode; ``transaction()`` groups statements."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url
        path = sqlite_path(url)
        self.path = path
        if path is not None:
            self.dialect = SQLITE
            if path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
                prepare(path, timeout=timeout)
            self.conn: Any = sqlite3.connect(path, timeout=timeout, isolation_level=None,
                                             check_same_thread=False)
        else:
            self.dialect = MYSQL
            self.conn = _mysql_connect(url, timeout)
        self._lock_fd: int | None = None

    def close(self) -> None:
        self.conn.close()

    def _sql(self, sql: str) -> str:
        return sql if self.dialect is SQLITE else sql.replace("?", "%s")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        cur = self.conn.cursor()
        try:
            cur.execute(self._sql(sql), tuple(params))
            return cast(int, cur.rowcount)
        finally:
            cur.close()

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement over many parameter rows (a bulk insert)."""
        cur = self.conn.cursor()
        try:
            cur.executemany(self._sql(sql), [tuple(r) for r in rows])
        finally:
            cur.close()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        try:
            cur.execute(self._sql(sql), tuple(params))
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def query_in(self, sql: str, params: Sequence[Any], values: Sequence[Any]
                 ) -> list[tuple[Any, ...]]:
        """``sql`` ending in ``IN (`` ... ``)`` written as ``IN ({})``: run for each
        ``IN_CHUNK`` of ``values`` (a statement's placeholders stay bounded), after the
        leading ``params``; the rows of all."""
        rows: list[tuple[Any, ...]] = []
        for i in range(0, len(values), IN_CHUNK):
            chunk = list(values[i : i + IN_CHUNK])
            rows += self.query(sql.format(", ".join("?" for _ in chunk)), [*params, *chunk])
        return rows

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.execute("BEGIN IMMEDIATE" if self.dialect is SQLITE else "START TRANSACTION")
        try:
            yield
        except BaseException:
            self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    @contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """A non-blocking cross-process lock (ArchiveBusy when held): an fcntl lock beside
        a SQLite file, MariaDB's GET_LOCK on a shared server. Both die with the holder."""
        if self.dialect is MYSQL:
            got = self.query("SELECT GET_LOCK(?, 0)", (f"jobreport:{name}",))[0][0]
            if got != 1:
                raise ArchiveBusy(f"another process holds the {name} lock")
            try:
                yield
            finally:
                self.query("SELECT RELEASE_LOCK(?)", (f"jobreport:{name}",))
            return
        lock_path = f"{self.path}.{name}.lock" if self.path != ":memory:" else None
        if lock_path is None:
            yield
            return
        with held(lock_path, ArchiveBusy(f"another process holds {lock_path}")):
            yield


def _mysql_connect(url: str, timeout: float) -> Any:
    import pymysql

    return pymysql.connect(
        **mysql_params(url, "jobreport_archive"),
        connect_timeout=int(timeout),
        autocommit=True,
        charset="utf8mb4",
    )
