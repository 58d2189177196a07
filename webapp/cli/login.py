"""``jobreport`` for whoever runs it on a login node.

Who may read what (README "Login nodes", SECURITY.md):

- a process that can read the accounting view (the service user, root: it can read
  JOBREPORT_DB_PASSWORD_FILE, or the URL holds the password) builds every report in full;
- anybody else reads what Slurm shows them: ``sacct`` runs as the caller, so Slurm's
  ``PrivateData`` decides which jobs they see at all. For their own jobs (and, for the
  names in JOBREPORT_STAFF, every job) the report is complete: sacct stands in for the
  view and Prometheus gives the usage. For another user's job they get only what sacct
  showed them, with a note that usage is for the owner and staff.
"""

from __future__ import annotations

import argparse
import os
import pwd
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from webapp.formatting import format_duration, format_percent
from webapp.model import JobId, JobNotFound, JobReport, SacctJob, SourceUnavailable, Usage
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.history_data import HistorySource
from webapp.sources.sacct import SacctSource
from webapp.sources.sacct_accounting import NoAccounting, SacctAccounting

WITHHELD = "usage from the job's nodes is shown to the job's owner and staff only"
RECENT_DAYS = 7
RECENT_LIMIT = 20
BUILDERS = 4  # reports built at once for the listing


class WithheldMetrics:
    """The metrics reader for another user's job on a login node: asks nothing."""

    name = "prometheus"

    def usage(self, job_id: JobId, start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        raise SourceUnavailable("prometheus", WITHHELD)


class OnceSacct(SacctSource):
    """sacct asked once per job: the owner check, the view's stand-in and the report
    read the same answer."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._jobs: dict[str, SacctJob] = {}

    def job(self, job_id: JobId | str) -> SacctJob:
        key = str(JobId.of(job_id))
        if key not in self._jobs:
            self._jobs[key] = super().job(key)
        return self._jobs[key]


def caller() -> str:
    """The user running this process (the kernel's word, not an environment variable)."""
    return pwd.getpwuid(os.getuid()).pw_name


def sacct_for(settings: Settings) -> SacctSource:
    return OnceSacct(settings.sacct, timeout=settings.sacct_timeout, cluster=settings.cluster)


def service_for(settings: Settings, job_id: JobId, who: str | None = None
                ) -> tuple[ReportService, bool]:
    """(the service to build ``job_id`` with, whether the archive may stand in).
    Raises JobNotFound when Slurm shows the caller no such job."""
    if settings.db_readable:
        return ReportService(settings), True
    who = who or caller()
    sacct = sacct_for(settings)
    owner = sacct.job(job_id).user
    if owner == who or who in settings.staff:
        full = ReportService(settings, accounting=SacctAccounting(sacct, settings.cluster),
                             sacct=sacct)
        full.history = HistorySource(sacct, full.prometheus, gpu_idle=full.thresholds.gpu_idle)
        # The archive holds every user's reports: the service user reads it, not callers.
        return full, False
    return ReportService(settings, accounting=NoAccounting(), sacct=sacct,
                         prometheus=WithheldMetrics()), False


def build_for_caller(settings: Settings, job_id: JobId, resolution: str = "plot",
                     sizing: bool = True) -> JobReport:
    service, archive = service_for(settings, job_id)
    return service.build(job_id, strict_accounting=False, archive_fallback=archive,
                         resolution=resolution, sizing=sizing)


def add_jobs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", help="whose jobs (default: yours)")
    parser.add_argument("--days", type=float, default=RECENT_DAYS,
                        help=f"how far back (default {RECENT_DAYS})")
    parser.add_argument("--limit", type=int, default=RECENT_LIMIT,
                        help=f"the most recent N jobs (default {RECENT_LIMIT})")


def recent_ids(settings: Settings, user: str, since: datetime) -> list[str]:
    """The user's jobs submitted since ``since``, newest first (one sacct call)."""
    hist = HistorySource(sacct_for(settings), None)
    jobs = hist.jobs(user, None, since, datetime.now(UTC))
    jobs.sort(key=lambda p: (p.submit or 0.0, p.sacct.job_id), reverse=True)
    return [p.sacct.job_id for p in jobs]


def run_jobs(args: argparse.Namespace, settings: Settings) -> int:
    """The caller's recent jobs, one line each, with the figures of their reports."""
    user = getattr(args, "user", None) or caller()
    days = getattr(args, "days", RECENT_DAYS)
    limit = max(1, getattr(args, "limit", RECENT_LIMIT))
    ids = recent_ids(settings, user, datetime.now(UTC) - timedelta(days=days))
    shown = ids[:limit]

    def one(job_id: str) -> JobReport | str:
        try:
            return build_for_caller(settings, JobId.parse(job_id), sizing=False)
        except (JobNotFound, SourceUnavailable) as exc:
            return str(exc)

    with ThreadPoolExecutor(BUILDERS) as pool:
        reports = list(pool.map(one, shown))
    print(f"Jobs of {user} in the last {days:g} days: {len(ids)}"
          + (f", the {len(shown)} most recent (--limit)" if len(ids) > len(shown) else ""))
    if not shown:
        return 0
    print(f"{'job':<12} {'name':<16} {'state':<13} {'elapsed':>8} {'CPU eff':>8} "
          f"{'mem eff':>8} {'findings':>8}")
    for job_id, r in zip(shown, reports, strict=True):
        if isinstance(r, str):
            print(f"{job_id[:12]:<12} {r[:65]}")
            continue
        print(f"{job_id[:12]:<12} {_clean(r.job_name)[:16]:<16} {_clean(r.state)[:13]:<13} "
              f"{format_duration(r.elapsed_seconds):>8} {format_percent(r.cpu_efficiency):>8} "
              f"{format_percent(r.memory_efficiency):>8} {len(r.findings):>8}")
    print("Details: jobreport show JOBID; one name's history: jobreport history --name NAME")
    return 0


def _clean(text: str | None) -> str:
    # Slurm text is untrusted: no control characters on the terminal.
    return "".join(c if c.isprintable() else "?" for c in (text or "-"))
