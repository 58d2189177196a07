"""`jobreport opt-out`: staff record who gets no report or digest emails (as the link in
every email does), undo it, or list who is opted out and how."""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime
from typing import TextIO

from webapp.archive.mail_state import MailState
from webapp.archive.store import Archive
from webapp.cli.arguments import user_name
from webapp.mail.policy import read_opt_out
from webapp.settings import Settings


def add_opt_out_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("users", nargs="*", type=user_name, metavar="USER")
    parser.add_argument("--undo", action="store_true",
                        help="send these users emails again (the opt-out file still counts)")
    parser.add_argument("--list", action="store_true", help="list who gets no emails, and why")


def run_opt_out(args: argparse.Namespace, settings: Settings,
                out: TextIO = sys.stdout) -> int:
    with Archive(settings.archive_url) as archive:
        mail = MailState(archive.db)
        by = f"staff:{getpass.getuser()}"
        for user in args.users:
            if args.undo:
                done = mail.opt_in(settings.cluster, user)
                out.write(f"{user}: {'emails again' if done else 'was not opted out'}\n")
            else:
                done = mail.opt_out(settings.cluster, user, by)
                out.write(f"{user}: {'opted out' if done else 'already opted out'}\n")
        if args.list or not args.users:
            for user, (at, who) in mail.opted_out(settings.cluster).items():
                when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M")
                out.write(f"{user}\topted out {when} UTC by {who}\n")
            for user in sorted(read_opt_out(settings.mail_opt_out)):
                out.write(f"{user}\tin {settings.mail_opt_out}\n")
    return 0
