"""``mysql://user:pass@host:port/db?unix_socket=/path`` as pymysql's connection arguments:
one reading of the URL for the accounting view and the archive; and the driver itself,
which only the ``mariadb`` extra installs."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urlsplit

NO_DRIVER = "PyMySQL is not installed (pip install 'jobreport[mariadb]')"


def import_pymysql() -> ModuleType:
    """The pymysql module; ImportError saying which extra installs it when it is missing."""
    try:
        return importlib.import_module("pymysql")
    except ImportError:
        raise ImportError(NO_DRIVER) from None


def mysql_params(url: str, default_db: str) -> dict[str, Any]:
    """Host, port, user, password, database and socket of a ``mysql://`` URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError(f"a MariaDB URL starts with mysql://, not {parts.scheme!r}")
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""),
        "database": (parts.path or "").lstrip("/") or default_db,
        "unix_socket": query.get("unix_socket"),
    }
