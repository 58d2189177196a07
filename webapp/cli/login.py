"""``jobreport`` for whoever runs it on a login node.

Who may read what (README "Login nodes", SECURITY.md):

- root and the service's own user (JOBREPORT_SERVICE_USER; ``Settings.privileged``,
  decided by who runs the process, not by which files or passwords it can read) build
  every report in full from the view and the archive;
- anybody else reads what Slurm shows them: ``sacct`` runs as the caller, so Slurm's
  ``PrivateData`` decides which jobs they see at all. For their own jobs (and, for the
  names in JOBREPORT_STAFF, every job) the report is complete: sacct stands in for the
  view and Prometheus gives the usage. For another user's job they get only what sacct
  showed them, with a note that usage is for the owner and staff.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from webapp.model import JobId, JobReport, SacctJob, SourceUnavailable, Usage
from webapp.report.job_rows import JobRow, ListSources, list_jobs
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.from_settings import prometheus_from
from webapp.sources.gpu_metrics import TRES
from webapp.sources.history_data import HistorySource
from webapp.sources.no_metrics import NoMetrics
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.sacct import SacctSource
from webapp.sources.sacct_accounting import NoAccounting, SacctAccounting, SacctJobList

WITHHELD = "usage from the job's nodes is shown to the job's owner and staff only"


class WithheldMetrics:
    """The metrics reader for another user's job on a login node: asks nothing."""

    name = "prometheus"

    def usage(self, job_id: JobId | tuple[str, ...], start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        raise SourceUnavailable("prometheus", WITHHELD)

    def vector(self, query: str, time: float | None = None) -> list[tuple[dict[str, str], float]]:
        raise SourceUnavailable("prometheus", WITHHELD)


class OnceSacct(SacctSource):
    """sacct asked once per job: the owner check, the view's stand-in and the report
    read the same answer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # SacctSource's own
        super().__init__(*args, **kwargs)
        self._jobs: dict[str, SacctJob] = {}

    def job(self, job_id: JobId | str) -> SacctJob:
        key = str(JobId.of(job_id))
        if key not in self._jobs:
            self._jobs[key] = super().job(key)
        return self._jobs[key]

    def job_figures(self, job_id: JobId | str) -> SacctJob:
        return self.job(job_id)  # the answer already read holds every column


def caller() -> str:
    """The user running this process (the kernel's word, not an environment variable)."""
    return pwd.getpwuid(os.getuid()).pw_name


def sacct_for(settings: Settings) -> SacctSource:
    return OnceSacct(settings.sacct, timeout=settings.sacct_timeout, cluster=settings.cluster,
                     gpu_tres=settings.gpu_metrics == TRES.name)


def service_for(settings: Settings, job_id: JobId, who: str | None = None
                ) -> tuple[ReportService, bool]:
    """(the service to build ``job_id`` with, whether the archive may stand in).
    Raises JobNotFound when Slurm shows the caller no such job."""
    if settings.privileged:
        return ReportService(settings), True
    who = who or caller()
    sacct = sacct_for(settings)
    owner = sacct.job(job_id).user
    if owner == who or who in settings.staff:
        full = ReportService(settings, accounting=SacctAccounting(sacct, settings.cluster),
                             sacct=sacct)
        metrics = full.prometheus  # none was passed in: the settings' own, or NoMetrics
        assert isinstance(metrics, PrometheusSource | NoMetrics)
        full.history = HistorySource(sacct, metrics, gpu_idle=full.thresholds.gpu_idle)
        # The archive holds every user's reports: the service user reads it, not callers.
        return full, False
    return ReportService(settings, accounting=NoAccounting(), sacct=sacct,
                         prometheus=WithheldMetrics()), False


def build_for_caller(settings: Settings, job_id: JobId, resolution: str = "plot",
                     sizing: bool = True) -> JobReport:
    service, archive = service_for(settings, job_id)
    owner = None
    if isinstance(service.sacct, OnceSacct):  # its answer is in hand: the history starts now
        known = service.sacct.job(job_id)
        owner = (known.user, known.job_name) if known.user and known.job_name else None
    return service.build(job_id, strict_accounting=False, archive_fallback=archive,
                         resolution=resolution, sizing=sizing, owner=owner)


def recent_rows(settings: Settings, user: str, who: str, since: datetime, now: datetime
                ) -> tuple[list[JobRow], list[str]]:
    """``user``'s jobs since ``since`` as the web's job list computes them (rows, notes on
    what is missing). The service user reads the view, sacct and the archive, as the web
    app does; anyone else one ``sacct`` call as themselves, with Prometheus' GPU figures
    for their own jobs (staff: anybody's) and no archive (it holds everyone's reports).
    Raises SourceUnavailable when the view (or, standing in for it, sacct) fails."""
    if settings.privileged:
        return ReportService(settings).job_list(since, now, user=user)
    listing = SacctJobList(sacct_for(settings), settings.cluster)
    mine = user == who or who in settings.staff
    src = ListSources(listing, listing.figures,
                      prometheus_from(settings) if mine else WithheldMetrics(),
                      archived=lambda cluster, job_id: None)
    return list_jobs(src, since, now, user=user), src.gaps
