"""`jobreport db-setup`: options and output; the work is in ``mgmt.setup``."""

from __future__ import annotations

import argparse
import sys

from mgmt.setup import apply, build_statements, reader_password_from_url, registered_clusters
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
        help="host part of the restricted user (default: localhost and 127.0.0.1)",
    )
    parser.add_argument("--acct-db", default="slurm_acct_db", help="slurmdbd's StorageLoc")
    parser.add_argument(
        "--admin-socket",
        default="/run/mysqld/mysqld.sock",
        help="MariaDB socket to connect to as --admin-user",
    )
    parser.add_argument(
        "--admin-user", default="root", help="administrator (unix-socket authentication by default)"
    )
    parser.add_argument("--admin-password", default=None, help="administrator password, if any")


def clusters(args: argparse.Namespace) -> list[str]:
    """The --cluster names, then every other cluster slurmdbd registered (a view without a
    cluster's branch would answer "not found" for all its jobs)."""
    given = list(args.cluster or [])
    if args.print_only and given:
        return given
    registered = registered_clusters(args.admin_socket, args.admin_user, args.acct_db,
                                     args.admin_password)
    return given + [c for c in registered if c not in given]


def run(args: argparse.Namespace, db_url: str) -> int:
    hosts = args.reader_host or ["localhost", "127.0.0.1"]
    names = clusters(args)
    if args.print_only:
        # The printed SQL is for reading and review: the password stays out of terminals
        # and logs (replace the placeholder to run it by hand).
        statements = build_statements(names, "<password>", hosts, args.acct_db)
        sys.stdout.write(";\n\n".join(statements) + ";\n")
        return 0
    statements = build_statements(names, reader_password_from_url(db_url), hosts, args.acct_db)
    apply(statements, args.admin_socket, args.admin_user, args.admin_password)
    sys.stdout.write(f"jobreport views ready for cluster(s): {', '.join(names)}\n")
    return 0


def run_db_setup(args: argparse.Namespace, settings: Settings) -> int:
    return run(args, settings.db_url)
