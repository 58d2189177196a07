"""The ``jobreport`` command line: one registry of subcommands, each in its own module.

Every option and every line written to the terminal lives in this package; the library
below it takes plain arguments and returns values.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jobreport_common.redact import redact
from mgmt.setup import SetupError
from webapp.cli import (
    account_report,
    db_setup,
    db_upgrade,
    digest,
    history,
    jobs,
    mail,
    opt_out,
    policy,
    rejudge,
    serve,
    show,
    staff,
    sync,
    watch,
)
from webapp.migrations import SchemaOutdated
from webapp.model import InvalidJobId, JobNotFound, SourceUnavailable
from webapp.settings import Settings, SettingsError

Handler = Callable[[argparse.Namespace, Settings], int]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, its one-line help and longer description, the function
    that adds its options and the handler that runs it (both from its module)."""

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler


COMMANDS: tuple[Command, ...] = (
    Command("jobs", "list your recent jobs (the default command)",
            "Your jobs that ended in the last 7 days or have not ended, newest first, "
            "with the web app's figures: elapsed, CPU and memory efficiency, GPU use and "
            "the number of findings of the archived report.",
            jobs.add_jobs_arguments, jobs.run_jobs),
    Command("history", "past jobs of one name and the #SBATCH block they suggest",
            "Your jobs of one name (or every name) with their peaks and "
            "efficiencies, and one #SBATCH block computed from them: --mem from the 95th "
            "percentile of the peaks plus 20 %%, --time from the 95th percentile of elapsed "
            "plus 30 %%, each at least the largest run's; --cpus-per-task and --gpus from "
            "what was used.",
            history.add_history_arguments, history.run_history),
    Command("show", "print one job's report",
            "Print one job's report (123, 123_4 or 123+1).",
            show.add_show_arguments, show.run_show),
    Command("serve", "run the web app (development server)",
            "Run the web app; use gunicorn 'webapp:create_app()' in production.",
            serve.add_serve_arguments, serve.run_serve),
    Command("email", "email one job's report by hand",
            "Email one job's report through the durable outbox: to its owner by the "
            "sync's policy (opt-outs, daily cap) and never a second time, or --to ADDR. "
            "`jobreport sync` emails ended jobs.",
            mail.add_email_arguments, mail.run_email),
    Command("outbox", "show pending and failed emails, or the outbox's state",
            "Show the outbox's pending and failed emails; --status its state (counts per "
            "status, the oldest unsent message, the last error, the messages given up), "
            "--format json for a monitor; --retry delivers now.",
            mail.add_outbox_arguments, mail.run_outbox),
    Command("sync", "archive and email the jobs that ended since the last run",
            "Walk the jobs that ended since the per-cluster watermark, oldest "
            "first: archive each report (summary and downsampled series) and queue its "
            "email. Idempotent; run every minute by jobreport-sync.timer.",
            sync.add_sync_arguments, sync.run_sync),
    Command("watch", "alert the owners of running jobs that waste or risk their allocation",
            "Apply the watch rules (idle GPUs, an idle node, memory about to run "
            "out, a time limit near without output, small files off scratch) to every running "
            "job over trailing windows; email each owner once per job and rule; cancel what "
            "the enforcement policy names. Run every few minutes by jobreport-watch.timer.",
            watch.add_watch_arguments, watch.run_watch),
    Command("staff-report", "ranked tables of who wasted what, for the support staff",
            "Rank the jobs that ended in the window (default 7 days) and their "
            "users: low CPU/GPU efficiency among the heaviest users, jobs fit for a smaller GPU "
            "or MIG slice, GPU fragmentation, idle nodes, unused memory and time, large-memory "
            "partitions without need, the longest waits with their reasons, repeat offenders. "
            "Window and partitions: JOBREPORT_STAFF_REPORT; thresholds: JOBREPORT_THRESHOLDS.",
            staff.add_staff_arguments, staff.run_staff_report),
    Command("digest", "queue and send each user's weekly digest",
            "Per user with archived jobs in the week: their jobs, the CPU-hours, "
            "GPU-hours and memory GiB-hours they requested and left unused, and their most "
            "common finding with its advice; through the outbox, once per user and week. "
            "Run weekly by jobreport-digest.timer.",
            digest.add_digest_arguments, digest.run_digest),
    Command("account-report", "one account's usage per member, for its PI or coordinators",
            "Per member of an account over a month (--month, default the last) or "
            "--since/--until: CPU-hours allocated (sacct's CPUTimeRAW), used and idle, "
            "GPU-hours used and idle, memory asked and idle, kWh and CO2e; the costliest "
            "findings, totals and the change since the previous period. --email queues it "
            "(text and PDF) to each account's Slurm coordinators; run monthly by "
            "jobreport-account-report.timer.",
            account_report.add_account_report_arguments, account_report.run_account_report),
    Command("opt-out", "stop (or, with --undo, resume) report emails for users; list opt-outs",
            "Record that USERs get no report or digest emails (as the link in "
            "every email does); --undo sends them again; with no USER or --list, list who "
            "is opted out and how.",
            opt_out.add_opt_out_arguments, opt_out.run_opt_out),
    Command("policy", "check the site's policy, explain what of it applied to a job, or "
            "try a new one on the archive",
            "The site's policy (JOBREPORT_POLICY_DIR, docs/policy.md): `check [DIR]` "
            "reads it, rules and wording templates, and names each error's file and line; "
            "`explain JOBID` lists the overrides and site rules that applied to one job, "
            "and why; `diff [--since 30d] NEW_DIR` judges the archived reports under "
            "NEW_DIR beside the policy in force and lists the jobs whose findings would "
            "change, writing nothing.",
            policy.add_policy_arguments, policy.run_policy),
    Command("rejudge", "judge the archive's reports again under the policy in force",
            "Re-run the detectors on the archived reports that ended in the window "
            "(--since, default 30d) from their stored figures, under JOBREPORT_THRESHOLDS "
            "and JOBREPORT_POLICY_DIR as they are now, and write each back in place with "
            "the policy version it was judged by.",
            rejudge.add_rejudge_arguments, rejudge.run_rejudge),
    Command("db-setup", "create the restricted accounting user and view",
            "Create schema jobreport, a SQL SECURITY DEFINER view "
            "over the accounting tables and a user that can read only it. "
            "Idempotent.",
            db_setup.add_arguments, db_setup.run_db_setup),
    Command("db-upgrade", "create or upgrade the archive, the outbox and the web app's state",
            "Bring jobreport's own databases (JOBREPORT_ARCHIVE_URL, JOBREPORT_OUTBOX, "
            "JOBREPORT_WEB_STATE) to the schema this release needs, creating what is "
            "missing: a database an earlier release made keeps every row. Run it after "
            "installing a release, before the sync and the web app start (they refuse an "
            "older schema). Idempotent.",
            db_upgrade.add_arguments, db_upgrade.run_db_upgrade),
)
DEFAULT = jobs.run_jobs  # ``jobreport`` with no command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobreport",
        description="Per-job usage reports for Slurm: joins Prometheus, the accounting "
        "database and sacct. Without a command: your jobs of the last 7 days. Settings "
        "come from /etc/jobreport/jobreport.conf (JOBREPORT_CONFIG) and JOBREPORT_* "
        "environment variables.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.set_defaults(func=DEFAULT)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        command.add_arguments(p)
        p.set_defaults(func=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = Settings.from_env()
        handler: Handler = args.func
        return handler(args, settings)
    except InvalidJobId as exc:
        print(f"jobreport: {exc}", file=sys.stderr)
        return 2
    except JobNotFound as exc:
        print(f"jobreport: job {exc.job_id} not found", file=sys.stderr)
        return 1
    except (SourceUnavailable, SettingsError, ValueError, SetupError, SchemaOutdated) as exc:
        print(f"jobreport: {redact(str(exc))}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
