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
from dataclasses import dataclass
from importlib import resources
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from jobreport_common.mysql_url import import_pymysql
from jobreport_common.redact import redact
from mgmt.schema import missing_columns, needed_for

if TYPE_CHECKING:
    from pymysql.connections import Connection
    from pymysql.cursors import Cursor


class SetupError(RuntimeError):
    """The database refused a connection or a statement; the message says which."""


IDENT_RE = re.compile(r"^[A-Za-z0-9_]{1,64}\Z")
HOST_RE = re.compile(r"^[A-Za-z0-9_.%:/-]{1,255}\Z")
DEFAULT_SOCKET = "/run/mysqld/mysqld.sock"
VIEW_BRANCH, VIEWS = "03_job_view_branch.sql", "04_views.sql"
EVENT_BRANCH = "03_event_view_branch.sql"


def _sql(name: str) -> str:
    return resources.files("mgmt").joinpath(name).read_text()


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"invalid {what} {value!r}")
    return value


def _quote(text: str) -> str:
    _driver()
    from pymysql.converters import escape_string

    return "'" + escape_string(text) + "'"


@dataclass(frozen=True)
class Admin:
    """Where and as whom db-setup connects: a unix socket on this machine, or (``host``
    set) TCP to a database server elsewhere."""

    user: str = "root"
    password: str | None = None
    socket: str = DEFAULT_SOCKET
    host: str | None = None
    port: int = 3306

    def __str__(self) -> str:
        if self.host is None:
            return self.socket
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST[:PORT]`` -> (host, port), 3306 by default; an IPv6 address in brackets.

    >>> parse_host_port("db.example.org"), parse_host_port("[::1]:3307")
    (('db.example.org', 3306), ('::1', 3307))
    """
    m = re.match(r"^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_.-]+))(?::([0-9]{1,5}))?\Z", text)
    port = int(m.group(3) or 3306) if m else 0
    if not m or not 0 < port < 65536:
        raise ValueError(f"invalid --admin-host {text!r} (HOST, HOST:PORT or [IPv6]:PORT)")
    return m.group(1) or m.group(2), port


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
    out += split_statements(_sql(VIEWS).format(
        branches=_branches(VIEW_BRANCH, clusters, acct_db),
        event_branches=_branches(EVENT_BRANCH, clusters, acct_db), acct_db=acct_db))
    for host in hosts:
        out += split_statements(_sql("05_reader_grants.sql").format(reader_host=host))
    return out


def _branches(template: str, clusters: Sequence[str], acct_db: str) -> str:
    """A view's ``UNION ALL`` of one branch per cluster, comment lines dropped."""
    branch = _sql(template)
    return "\nUNION ALL\n".join(
        "\n".join(ln for ln in branch.format(cluster=c, acct_db=acct_db).splitlines()
                  if not ln.lstrip().startswith("--"))
        for c in clusters
    )


def reader_password_from_url(db_url: str) -> str:
    password = urlsplit(db_url).password
    if not password:
        raise ValueError("JOBREPORT_DB_URL has no password for the restricted user")
    return password


@dataclass(frozen=True)
class Schema:
    """What db-setup reads of slurmdbd's database before it creates anything."""

    clusters: tuple[str, ...]  # registered (``sacctmgr add cluster``), not deleted
    columns: dict[str, frozenset[str]]  # table -> its columns


def read_schema(admin: Admin, acct_db: str) -> Schema:
    """The registered clusters (the view must have a branch for each, or a job of a cluster
    left out is "not found") and every table's columns, in two queries."""
    acct_db = _check(IDENT_RE, acct_db, "accounting database name")
    conn = _connect(admin)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"SELECT name FROM `{acct_db}`.cluster_table"  # noqa: S608
                            " WHERE deleted = 0 ORDER BY name")
                clusters = tuple(str(row[0]) for row in cur.fetchall())
                cur.execute("SELECT table_name, column_name FROM information_schema.columns"
                            " WHERE table_schema = %s", (acct_db,))
                columns: dict[str, set[str]] = {}
                for table, column in cur.fetchall():
                    columns.setdefault(str(table), set()).add(str(column).lower())
            except Exception as exc:  # noqa: BLE001 - pymysql's errors, named in the message
                raise SetupError(f"cannot read the tables of {acct_db}: "
                                 f"{redact(str(exc.args[-1]))}") from None
    finally:
        conn.close()
    return Schema(clusters, {t: frozenset(c) for t, c in columns.items()})


def views_read(clusters: Sequence[str]) -> dict[str, frozenset[str]]:
    """Table -> the columns the views over ``clusters`` read (from their SQL files)."""
    return needed_for([_sql(VIEW_BRANCH), _sql(EVENT_BRANCH), _sql(VIEWS)], clusters)


def check_schema(schema: Schema, clusters: Sequence[str], acct_db: str) -> None:
    """SetupError naming every table or column the views would read that is not there."""
    unknown = [c for c in clusters if f"{c}_job_table" not in schema.columns]
    if unknown:
        raise SetupError(f"no job table for cluster(s) {', '.join(unknown)} in {acct_db} "
                         f"(registered: {', '.join(schema.clusters) or 'none'})")
    problems = missing_columns(views_read(clusters), schema.columns, acct_db)
    if problems:
        raise SetupError("this slurmdbd schema lacks what the views read: "
                         + "; ".join(problems))


def _driver() -> ModuleType:
    """pymysql, or SetupError naming the extra that installs it."""
    try:
        return import_pymysql()
    except ImportError as exc:
        raise SetupError(str(exc)) from None


LOCK_WAIT_SECONDS = 3  # under the readers' 5 s read timeout (connect_from_url)
LOCK_WAIT_TIMEOUT = 1205  # ER_LOCK_WAIT_TIMEOUT


def _connect(admin: Admin) -> Connection[Cursor]:
    pymysql = _driver()

    where = {"unix_socket": admin.socket} if admin.host is None else {
        "host": admin.host, "port": admin.port}
    try:
        conn: Connection[Cursor] = pymysql.connect(
            **where,
            user=admin.user,
            password=admin.password or "",
            autocommit=True,
            connect_timeout=30,
            # CREATE OR REPLACE VIEW waits for every open transaction that read the view,
            # and every new reader queues behind it: give up soon and say so, rather than
            # stall the web app and the sync for the server's default of a year.
            init_command=f"SET SESSION lock_wait_timeout = {LOCK_WAIT_SECONDS}",
        )
    except pymysql.MySQLError as exc:
        raise SetupError(
            f"cannot connect to MariaDB at {admin} as {admin.user}: "
            f"{redact(str(exc.args[-1]))}"
        ) from None
    return conn


def _admin(admin: Admin | str, user: str | None, password: str | None) -> Admin:
    # A socket path with a user and password is the older call (and the stack tests').
    if isinstance(admin, Admin):
        return admin
    return Admin(user=user or "root", password=password, socket=admin)


def apply(statements: Sequence[str], admin: Admin | str, admin_user: str | None = None,
          admin_password: str | None = None) -> None:
    """Run the statements in order as the administrator; SetupError names what failed."""
    pymysql = _driver()

    conn = _connect(_admin(admin, admin_user, admin_password))
    try:
        with conn.cursor() as cur:
            for stmt in statements:
                try:
                    cur.execute(stmt)
                except pymysql.MySQLError as exc:
                    # Redacted before it is cut short, so no partial password survives.
                    first = redact(stmt.splitlines()[0])[:70]
                    hint = (f" (another session held it for {LOCK_WAIT_SECONDS} s: an open"
                            " transaction reading the view; SHOW PROCESSLIST names it)"
                            if exc.args and exc.args[0] == LOCK_WAIT_TIMEOUT else "")
                    raise SetupError(f"{first!r} failed: {redact(str(exc.args[-1]))}{hint}"
                                     ) from None
    finally:
        conn.close()
