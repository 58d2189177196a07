"""`jobreport db-setup`: create the restricted accounting user and the views it reads.

The SQL lives next to this module as numbered files a DBA can read; this module only
fills in validated identifiers and runs them in order (the command line can print them
instead, with ``--print``).
Identifiers cannot be bound parameters in DDL, so they are checked against a strict
pattern instead; the password is quoted by the driver's escaper.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources
from urllib.parse import urlsplit

from jobreport_net.redact import redact


class SetupError(RuntimeError):
    """The database refused a connection or a statement; the message says which."""


IDENT_RE = re.compile(r"^[A-Za-z0-9_]{1,64}\Z")
HOST_RE = re.compile(r"^[A-Za-z0-9_.%:-]{1,255}\Z")


def _sql(name: str) -> str:
    return resources.files("mgmt").joinpath(name).read_text()


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"invalid {what} {value!r}")
    return value


def _quote(text: str) -> str:
    from pymysql.converters import escape_string

    return "'" + escape_string(text) + "'"


def split_statements(script: str) -> list[str]:
    """Split on ``;`` at line ends, dropping ``--`` comment lines.

    >>> split_statements("-- c\\nSELECT 1;\\nSELECT 2;")
    ['SELECT 1', 'SELECT 2']
    """
    lines = [ln for ln in script.splitlines() if not ln.lstrip().startswith("--")]
    parts = re.split(r";\s*$", "\n".join(lines), flags=re.M)
    return [p.strip() for p in parts if p.strip()]


def build_statements(
    clusters: Sequence[str], reader_password: str, reader_hosts: Sequence[str], acct_db: str
) -> list[str]:
    """Every statement db-setup runs, in order."""
    clusters = [_check(IDENT_RE, c, "cluster name") for c in clusters]
    hosts = [_check(HOST_RE, h, "reader host") for h in reader_hosts]
    acct_db = _check(IDENT_RE, acct_db, "accounting database name")
    if not clusters:
        raise ValueError("at least one --cluster is needed")
    out: list[str] = []
    for host in hosts:
        out += split_statements(
            _sql("01_schema_and_users.sql").format(
                reader_host=host, reader_password=_quote(reader_password)
            )
        )
    for cluster in clusters:
        out += split_statements(
            _sql("02_definer_grants.sql").format(cluster=cluster, acct_db=acct_db)
        )
    branch = _sql("03_job_view_branch.sql")
    branches = "\nUNION ALL\n".join(
        "\n".join(
            ln
            for ln in branch.format(cluster=c, acct_db=acct_db).splitlines()
            if not ln.lstrip().startswith("--")
        )
        for c in clusters
    )
    out += split_statements(_sql("04_views.sql").format(branches=branches, acct_db=acct_db))
    for host in hosts:
        out += split_statements(_sql("05_reader_grants.sql").format(reader_host=host))
    return out


def reader_password_from_url(db_url: str) -> str:
    password = urlsplit(db_url).password
    if not password:
        raise ValueError("JOBREPORT_DB_URL has no password for the restricted user")
    return password


def registered_clusters(admin_socket: str, admin_user: str, acct_db: str,
                        admin_password: str | None = None) -> list[str]:
    """The clusters slurmdbd has registered (``sacctmgr add cluster``): the view must have a
    branch for each, or a job of a cluster left out is "not found"."""
    acct_db = _check(IDENT_RE, acct_db, "accounting database name")
    conn = _connect(admin_socket, admin_user, admin_password)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"SELECT name FROM `{acct_db}`.cluster_table"  # noqa: S608
                            " WHERE deleted = 0 ORDER BY name")
            except Exception as exc:  # noqa: BLE001 - pymysql's errors, named in the message
                raise SetupError(f"cannot list the clusters of {acct_db}: "
                                 f"{redact(str(exc.args[-1]))}") from None
            return [str(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()


def _connect(admin_socket: str, admin_user: str, admin_password: str | None) -> object:
    import pymysql

    try:
        conn = pymysql.connect(
            unix_socket=admin_socket,
            user=admin_user,
            password=admin_password or "",
            autocommit=True,
        )
    except pymysql.MySQLError as exc:
        raise SetupError(
            f"cannot connect to MariaDB at {admin_socket} as {admin_user}: "
            f"{redact(str(exc.args[-1]))}"
        ) from None
    return conn


def apply(statements: Sequence[str], admin_socket: str, admin_user: str,
          admin_password: str | None = None) -> None:
    """Run the statements in order as the administrator; SetupError names what failed."""
    import pymysql

    conn = _connect(admin_socket, admin_user, admin_password)
    try:
        with conn.cursor() as cur:
            for stmt in statements:
                try:
                    cur.execute(stmt)
                except pymysql.MySQLError as exc:
                    # Redacted before it is cut short, so no partial password survives.
                    first = redact(stmt.splitlines()[0])[:70]
                    raise SetupError(f"{first!r} failed: {redact(str(exc.args[-1]))}") from None
    finally:
        conn.close()
