"""The ``jobreport`` command line: show, serve, email, outbox, sync, digest, opt-out, db-setup.

Every option and every line written to the terminal lives in this package; the library
below it takes plain arguments and returns values.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from jobreport_net.bind import parse_bind
from jobreport_net.redact import redact
from mgmt.setup import SetupError
from webapp.cli import db_setup
from webapp.cli.history import add_history_arguments, run_history
from webapp.cli.login import add_jobs_arguments, build_for_caller, run_jobs
from webapp.cli.mail import add_email_arguments, add_outbox_arguments, run_email, run_outbox
from webapp.cli.policy import add_digest_arguments, add_opt_out_arguments, run_digest, run_opt_out
from webapp.cli.staff import add_staff_arguments, run_staff_report
from webapp.cli.sync import add_sync_arguments, run_sync
from webapp.cli.watch import add_watch_arguments, run_watch
from webapp.model import InvalidJobId, JobId, JobNotFound, JobReport, SourceUnavailable
from webapp.settings import Settings, SettingsError
from webapp.sources.prometheus import RESOLUTIONS

FORMATS = ("text", "json", "html", "pdf")


def _render(report: JobReport, fmt: str, pretty: bool = False) -> str | bytes:
    if fmt == "json":
        from webapp.renderers import json as json_renderer

        return json_renderer.render(report, pretty=pretty)
    if fmt == "html":
        from webapp.renderers import html as renderer
    elif fmt == "pdf":
        from webapp.renderers import pdf as renderer
    else:
        from webapp.renderers import text as renderer
    return renderer.render(report)


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    job_id = JobId.parse(args.job_id)
    if args.cluster:
        try:
            settings = settings.for_cluster(args.cluster)
        except KeyError:
            served = ", ".join(settings.cluster_names)
            sys.stderr.write(f"jobreport: unknown cluster {args.cluster!r} (served: {served}; "
                             "others are added with JOBREPORT_CLUSTERS)\n")
            return 2
    report = build_for_caller(settings, job_id, resolution=args.resolution)
    out = _render(report, args.format, pretty=args.pretty)
    if args.output:
        mode = "wb" if isinstance(out, bytes) else "w"
        with open(args.output, mode) as fh:
            fh.write(out)
    elif isinstance(out, bytes):
        sys.stdout.buffer.write(out)
    else:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """The Flask development server (gunicorn in production)."""
    from webapp.web.app import create_app

    host, port = parse_bind(settings.bind, "127.0.0.1")
    create_app(settings).run(host=args.host or host, port=args.port or port, threaded=True)
    return 0


def cmd_email(args: argparse.Namespace, settings: Settings) -> int:
    return run_email(args, settings)


def cmd_outbox(args: argparse.Namespace, settings: Settings) -> int:
    return run_outbox(args, settings)


def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    return run_sync(args, settings)


def cmd_db_setup(args: argparse.Namespace, settings: Settings) -> int:
    return db_setup.run(args, settings.db_url)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobreport",
        description="Per-job usage reports for Slurm: joins Prometheus, the accounting "
        "database and sacct. Without a command: your jobs of the last 7 days. Settings "
        "come from /etc/jobreport/jobreport.conf (JOBREPORT_CONFIG) and JOBREPORT_* "
        "environment variables.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.set_defaults(func=run_jobs)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    jobs = sub.add_parser(
        "jobs",
        help="list your recent jobs (the default command)",
        description="Your jobs of the last 7 days, newest first: elapsed, CPU and memory "
        "efficiency and the number of findings of each one's report.",
    )
    add_jobs_arguments(jobs)
    jobs.set_defaults(func=run_jobs)

    hist = sub.add_parser(
        "history",
        help="past jobs of one name and the #SBATCH block they suggest",
        description="Your jobs of one name (or every name) with their peaks and "
        "efficiencies, and one #SBATCH block computed from them: --mem from the 95th "
        "percentile of the peaks plus 20 %%, --time from the 95th percentile of elapsed "
        "plus 30 %%, --cpus-per-task and --gpus from what was used.",
    )
    add_history_arguments(hist)
    hist.set_defaults(func=run_history)

    show = sub.add_parser(
        "show",
        help="print one job's report",
        description="Print one job's report (123, 123_4 or 123+1).",
    )
    show.add_argument("job_id", metavar="JOBID")
    show.add_argument("--cluster", default=None,
                      help="the cluster the job ran on (ids repeat across clusters); "
                      "default JOBREPORT_CLUSTER")
    show.add_argument("--format", choices=FORMATS, default="text", help="output format")
    show.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    show.add_argument("--pretty", action="store_true", help="indent JSON (compact by default)")
    show.add_argument(
        "--resolution",
        choices=tuple(RESOLUTIONS),
        default="plot",
        help="series resolution: plot (about one point per pixel of a plot, the default) or "
        "full (up to 1,000 points per series)",
    )
    show.set_defaults(func=cmd_show)

    serve = sub.add_parser(
        "serve",
        help="run the web app (development server)",
        description="Run the web app; use gunicorn 'webapp:create_app()' in production.",
    )
    serve.add_argument("--host", help="address to bind (default from JOBREPORT_BIND)")
    serve.add_argument("--port", type=int, help="port (default from JOBREPORT_BIND)")
    serve.set_defaults(func=cmd_serve)

    email = sub.add_parser(
        "email",
        help="email reports to job owners",
        description="Email one job's report, or every job that ended "
        "recently (for cron), through the durable outbox.",
    )
    add_email_arguments(email)
    email.set_defaults(func=cmd_email)

    outbox = sub.add_parser(
        "outbox",
        help="show pending and failed emails",
        description="Show the outbox's pending and failed emails.",
    )
    add_outbox_arguments(outbox)
    outbox.set_defaults(func=cmd_outbox)

    sync = sub.add_parser(
        "sync",
        help="archive and email the jobs that ended since the last run",
        description="Walk the jobs that ended since the per-cluster watermark, oldest "
        "first: archive each report (summary and downsampled series) and queue its "
        "email. Idempotent; run every minute by jobreport-sync.timer.",
    )
    add_sync_arguments(sync)
    sync.set_defaults(func=cmd_sync)

    watch = sub.add_parser(
        "watch",
        help="alert the owners of running jobs that waste or risk their allocation",
        description="Apply the watch rules (idle GPUs, an idle node, memory about to run "
        "out, a time limit near without output, small files off scratch) to every running "
        "job over trailing windows; email each owner once per job and rule; cancel what "
        "the enforcement policy names. Run every few minutes by jobreport-watch.timer.",
    )
    add_watch_arguments(watch)
    watch.set_defaults(func=run_watch)

    staff = sub.add_parser(
        "staff-report",
        help="ranked tables of who wasted what, for the support staff",
        description="Rank the jobs that ended in the window (default 7 days) and their "
        "users: low CPU/GPU efficiency among the heaviest users, jobs fit for a smaller GPU "
        "or MIG slice, GPU fragmentation, idle nodes, unused memory and time, large-memory "
        "partitions without need, the longest waits with their reasons, repeat offenders. "
        "Thresholds and partitions: JOBREPORT_STAFF_REPORT.",
    )
    add_staff_arguments(staff)
    staff.set_defaults(func=run_staff_report)
    digest = sub.add_parser(
        "digest",
        help="queue and send each user's weekly digest",
        description="Per user with archived jobs in the week: their jobs, the CPU-hours, "
        "GPU-hours and memory GB-hours they requested and left unused, and their most "
        "common finding with its advice; through the outbox, once per user and week. "
        "Run weekly by jobreport-digest.timer.",
    )
    add_digest_arguments(digest)
    digest.set_defaults(func=run_digest)

    opt_out = sub.add_parser(
        "opt-out",
        help="stop (or, with --undo, resume) report emails for users; list opt-outs",
        description="Record that USERs get no report or digest emails (as the link in "
        "every email does); --undo sends them again; with no USER or --list, list who "
        "is opted out and how.",
    )
    add_opt_out_arguments(opt_out)
    opt_out.set_defaults(func=run_opt_out)

    setup = sub.add_parser(
        "db-setup",
        help="create the restricted accounting user and view",
        description="Create schema jobreport, a SQL SECURITY DEFINER view "
        "over the accounting tables and a user that can read only it. "
        "Idempotent.",
    )
    db_setup.add_arguments(setup)
    setup.set_defaults(func=cmd_db_setup)
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
        return args.func(args, settings)
    except InvalidJobId as exc:
        print(f"jobreport: {exc}", file=sys.stderr)
        return 2
    except JobNotFound as exc:
        print(f"jobreport: job {exc.job_id} not found", file=sys.stderr)
        return 1
    except (SourceUnavailable, SettingsError, ValueError, SetupError) as exc:
        print(f"jobreport: {redact(str(exc))}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
