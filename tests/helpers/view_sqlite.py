"""The accounting view's rows in an SQLite table, read by ``AccountingSource``'s own SQL.

The view's queries (``webapp.sources.accounting.QUERIES``) are plain SQL with ``%s``
placeholders and one back-quoted column, which SQLite also reads; this connection turns
``%s`` into ``?`` and answers rows as dicts, as pymysql's DictCursor does. So a test runs
the real queries and the real row parser on captured rows without MariaDB.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webapp.sources.accounting import COLUMNS

NAMES = tuple(c.strip().strip("`") for c in COLUMNS.split(","))
# Columns the view gained after the rows were captured (fixtures/accounting/): NULL there.
LATER = frozenset({"qos"})


class ViewCursor:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.cur = conn.cursor()

    def __enter__(self) -> ViewCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cur.close()

    def execute(self, sql: str, params: Sequence[object]) -> None:
        self.cur.execute(sql.replace("%s", "?"), tuple(params))

    def fetchall(self) -> list[dict[str, Any]]:
        names = [d[0] for d in self.cur.description]
        return [dict(zip(names, row, strict=True)) for row in self.cur.fetchall()]


class SqliteView:
    """A connection to an in-memory view holding ``rows`` (dicts keyed by its columns)."""

    def __init__(self, rows: Iterable[Mapping[str, Any]],
                 tres: Iterable[tuple[int, str, str]] = ((1001, "gres", "gpu"),)) -> None:
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.conn.execute(f"CREATE TABLE jobs ({', '.join(f'`{n}`' for n in NAMES)})")
        self.conn.execute("CREATE TABLE tres (id, type, name)")
        # the view of slurmdbd's node events (mgmt/03_event_view_branch.sql): none here
        self.conn.execute("CREATE TABLE node_events (cluster, node, start_time, end_time, "
                          "state, reason)")
        self.insert(rows)
        self.conn.executemany("INSERT INTO tres VALUES (?, ?, ?)", list(tres))

    def insert(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Rows (dicts keyed by the view's columns) added to the view."""
        self.conn.executemany(
            f"INSERT INTO jobs VALUES ({', '.join('?' for _ in NAMES)})",  # noqa: S608
            [tuple(r.get(n) if n in LATER else r[n] for n in NAMES) for r in rows])

    def cursor(self) -> ViewCursor:
        return ViewCursor(self.conn)

    def close(self) -> None:
        """The source closes each connection after a query; the table lives on."""
