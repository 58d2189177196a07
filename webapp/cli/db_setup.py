"""`jobreport db-setup`: options and output; the work is in ``mgmt.setup``."""

from __future__ import annotations

import argparse
import sys

from mgmt.setup import (
    DEFAULT_SOCKET,
    Admin,
    SetupError,
    apply,
    build_statements,
    check_schema,
    parse_host_port,
    read_schema,
    reader_password_from_url,
)
from webapp.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster",
        action="append",
        default=None,
        help="Slurm cluster name; repeat for several (one UNION branch each). Every "
        "cluster slurmdbd has registered gets a branch too; with --print and no "
        "--cluster, the registered ones are printed",
    )
    parser.add_argument(
        "--print",
        action="store_true",
        dest="print_only",
        help="print the SQL instead of running it",
    )
    parser.add_argument(
        "--reader-host",
        action="append",
        default=None,
        help="host part of the restricted user: where jobreport connects from, as the "
        "database server sees it (a name, an address, '%%' wildcards or ADDR/NETMASK); "
        "repeat for several (default: localhost and 127.0.0.1)",
    )
    parser.add_argument("--acct-db", default="slurm_acct_db", help="slurmdbd's StorageLoc")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--admin-socket",
        default=None,
        help=f"MariaDB socket on this machine to connect to as --admin-user "
        f"(default: {DEFAULT_SOCKET})",
    )
    where.add_argument(
        "--admin-host",
        default=None,
        metavar="HOST[:PORT]",
        help="connect over TCP instead (a database server that is not this machine; "
        "port 3306 by default)",
    )
    parser.add_argument(
        "--admin-user", default="root", help="administrator (unix-socket authentication by default)"
    )
    parser.add_argument("--admin-password", default=None, help="administrator password, if any")


def admin_from(args: argparse.Namespace) -> Admin:
    """The administrator's connection the options name."""
    if args.admin_host is not None:
        host, port = parse_host_port(args.admin_host)
        return Admin(args.admin_user, args.admin_password, host=host, port=port)
    return Admin(args.admin_user, args.admin_password, socket=args.admin_socket or DEFAULT_SOCKET)


def reader_hosts(args: argparse.Namespace) -> list[str]:
    """The restricted user's host parts. Over TCP the server sees this machine by another
    name than localhost, and the reader may run elsewhere still: it must be named."""
    if args.reader_host:
        return list(args.reader_host)
    if args.admin_host is not None:
        raise SetupError("--admin-host needs --reader-host: the host jobreport connects "
                         "from, as the database server sees it")
    return ["localhost", "127.0.0.1"]


def run(args: argparse.Namespace, db_url: str) -> int:
    hosts = reader_hosts(args)
    names = list(args.cluster or [])
    if not (args.print_only and names):
        # Every cluster slurmdbd registered gets a branch too (a view without one would
        # answer "not found" for all its jobs); whatever the views read must be there.
        schema = read_schema(admin_from(args), args.acct_db)
        names += [c for c in schema.clusters if c not in names]
        check_schema(schema, names, args.acct_db)
    if args.print_only:
        # The printed SQL is for reading and review: the password stays out of terminals
        # and logs (replace the placeholder to run it by hand).
        statements = build_statements(names, "<password>", hosts, args.acct_db)
        sys.stdout.write(";\n\n".join(statements) + ";\n")
        return 0
    statements = build_statements(names, reader_password_from_url(db_url), hosts, args.acct_db)
    apply(statements, admin_from(args))
    sys.stdout.write(f"jobreport views ready for cluster(s): {', '.join(names)}\n")
    return 0


def run_db_setup(args: argparse.Namespace, settings: Settings) -> int:
    return run(args, settings.db_url)
