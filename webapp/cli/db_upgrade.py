"""`jobreport db-upgrade`: bring jobreport's own databases to the schema of this release;
the work is in ``webapp.migrations``."""

from __future__ import annotations

import argparse
import os
import sys
import time

from jobreport_common.redact import redact_url
from jobreport_common.sqlite_file import sqlite_path
from webapp.migrations import State, connect, locations, state
from webapp.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sql", action="store_true",
                        help="print the SQL an upgrade would run, per database, and change "
                             "nothing (a missing SQLite file is not created)")


def run_db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    from webapp.migrations import upgrade as migrations  # Alembic: only for this command

    out = sys.stdout
    for target, where in locations(settings).items():
        name = f"{target.what} ({redact_url(where)})"
        path = sqlite_path(where)
        if args.sql and path is not None and path != ":memory:" and not os.path.exists(path):
            out.write(f"-- {name}: not there yet\n")
            migrations.sql(target, State(None, empty=True), "sqlite", out, where)
            continue
        try:
            conn, dialect = connect(where, create=not args.sql)
        except OSError as exc:
            sys.stderr.write(f"jobreport: {name}: {exc}\n")
            return 1
        try:
            if args.sql:
                before = state(target, conn, dialect)
                out.write(f"-- {name}: {before.describe()}\n")
                migrations.sql(target, before, dialect, out, where)
                continue
            started = time.monotonic()
            before, after = migrations.run(target, conn, dialect, where)
        finally:
            conn.close()
        if before == after:
            out.write(f"{name}: at revision {after.revision}, the newest: nothing to do\n")
        else:
            out.write(f"{name}: {before.describe()}; now at revision {after.revision} "
                      f"({time.monotonic() - started:.1f} s)\n")
    return 0

