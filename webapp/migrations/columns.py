"""Column types the revisions share, each one type on SQLite and another on MariaDB: the
types the schema had when each database's DDL was written by hand, so a database made
by a revision and one made by the release before Alembic are alike. Released revisions
use these: change none, add a new one."""

from __future__ import annotations

from typing import TypedDict

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

TEXT = sa.Text()  # TEXT on both
INT = sa.Integer()  # INTEGER, INT
BIG = sa.Integer().with_variant(sa.BigInteger(), "mysql")  # INTEGER, BIGINT
DOUBLE: sa.REAL[float] = sa.REAL().with_variant(mysql.DOUBLE(), "mysql")  # REAL, DOUBLE
LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql")  # TEXT, LONGTEXT
LONG_BLOB = sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql")  # BLOB, LONGBLOB


def key(length: int) -> sa.types.TypeEngine[str]:
    """Text that is part of a key: TEXT on SQLite, VARCHAR(length) on MariaDB (whose keys
    take no TEXT)."""
    return sa.Text().with_variant(sa.String(length), "mysql")


def fixed(length: int) -> sa.types.TypeEngine[str]:
    """TEXT on SQLite, CHAR(length) on MariaDB (a day as YYYY-MM-DD)."""
    return sa.Text().with_variant(sa.CHAR(length), "mysql")


class MysqlTable(TypedDict):
    mysql_charset: str


# Every table on MariaDB: utf8mb4 (job and user names, findings' text).
MYSQL_TABLE: MysqlTable = {"mysql_charset": "utf8mb4"}
