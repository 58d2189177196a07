"""The report service: sources wired from settings, the report built and its findings
attached. What the command line, the web app and the mailer call."""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import cast

from jobreport_common.redact import redact
from webapp.archive.store import Archive
from webapp.detectors import judge
from webapp.detectors.policy import Policy
from webapp.detectors.policy_in_force import in_force
from webapp.model import (
    AccountingJob,
    Energy,
    Gap,
    JobId,
    JobNotFound,
    JobReport,
    SacctJob,
    SizingSuggestion,
    SourceUnavailable,
)
from webapp.report.archived import with_archive_fallback
from webapp.report.arrays import summarize_array
from webapp.report.build import build_report
from webapp.report.coverage import audited
from webapp.report.energy import Intensity, compute_energy, intensity_for
from webapp.report.history import history
from webapp.report.job_rows import JobRow, ListSources, archived_report, list_jobs
from webapp.report.jobstats_history import with_jobstats_summary
from webapp.report.node_events import with_node_events
from webapp.report.queue import with_queue
from webapp.report.sizing import GAP_SOURCE, UNAVAILABLE, SizingCache
from webapp.report.steps import step_lines
from webapp.report.waste import compute_waste
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource
from webapp.sources.cluster import ClusterSource
from webapp.sources.from_settings import prometheus_from
from webapp.sources.gpu_metrics import TRES, gpu_metrics
from webapp.sources.history_data import HistorySource
from webapp.sources.no_metrics import NoMetrics
from webapp.sources.partitions import PartitionSource
from webapp.sources.protocols import (
    AccountingReader,
    AdminCommentReader,
    BillingWeightsReader,
    ClusterReader,
    CoverageReader,
    MetricsReader,
    PartitionReader,
    QueueHistoryReader,
    RecentJobsReader,
    SacctReader,
    VectorReader,
)
from webapp.sources.sacct import SacctSource
from webapp.sources.slurmrestd import slurmrestd_from

log = logging.getLogger(__name__)


class ReportService:
    """The sources wired from settings; what the CLI, the web app and the mailer call."""

    def __init__(
        self,
        settings: Settings,
        accounting: AccountingReader | None = None,
        sacct: SacctReader | None = None,
        prometheus: MetricsReader | None = None,
        partitions: PartitionReader | None = None,
        cluster: ClusterReader | None = None,
        archive: Archive | None = None,
        history: HistorySource | None = None,
    ) -> None:
        self.settings = settings
        self.thresholds = settings.thresholds
        # The site's policy (JOBREPORT_POLICY_DIR), read again when its files change; one
        # broken before any good one loaded stops the start (PolicyError)
        self.policies = in_force(settings.policy_dir)
        self.policies.policy()
        # Where the GPU figures come from (JOBREPORT_GPU_METRICS): the audit names it
        self.gpu_metrics = gpu_metrics(settings.gpu_metrics)
        self.accounting = accounting or AccountingSource(settings.db_url, settings.cluster)
        # JOBREPORT_GPU_METRICS=tres: the GPU figures are the steps' usage TRES (sacct)
        self.gpu_tres = settings.gpu_metrics == TRES.name
        sacct_cli = SacctSource(
            settings.sacct, timeout=settings.sacct_timeout, cluster=settings.cluster,
            gpu_tres=self.gpu_tres,
        )
        rest = slurmrestd_from(settings) if settings.sacct_source == "slurmrestd" else None
        self.sacct = sacct or rest or sacct_cli
        default_prometheus = prometheus_from(settings)
        # A cluster served without a Prometheus of its own has no usage, never another's.
        fallback = default_prometheus if settings.prometheus_url else NoMetrics(settings.cluster)
        self.prometheus = prometheus or fallback
        # The sizing block reads the user's history through the same sacct and Prometheus;
        # a caller that injects its own sources passes the history source too (or none).
        self.history = history
        if history is None and sacct is None and prometheus is None:
            # the history's one bulk query stays a sacct call (its own fields and parser);
            # with no Prometheus passed in, self.prometheus is the fallback
            self.history = HistorySource(sacct_cli, fallback,
                                         gpu_idle=self.thresholds.gpu_idle)
        # The queue context reads slurm-exporter's series from the same Prometheus, with
        # the same credentials.
        self.cluster = cluster or ClusterSource(default_prometheus, settings.cluster)
        self.queue_history = (
            self.accounting if isinstance(self.accounting, QueueHistoryReader) else None
        )
        self.sizing_cache: SizingCache[SizingSuggestion | None] = SizingCache(
            settings.sizing_cache_seconds)
        self._archive = archive
        self.partitions = partitions or PartitionSource(
            settings.scontrol, timeout=settings.sacct_timeout
        )

    @property
    def archive(self) -> Archive | None:
        """The archive of ended jobs, opened on first use (None when it cannot be)."""
        if self._archive is None and self.settings.archive_url:
            try:
                self._archive = Archive(self.settings.archive_url)
            except Exception as exc:  # noqa: BLE001 - reports still work from the live sources
                log.warning("archive %s unavailable: %s", redact(self.settings.archive_url), exc)
        return self._archive

    def build(self, job_id: JobId | str, strict_accounting: bool = True,
              archive_fallback: bool = True, resolution: str = "plot",
              sizing: bool = True, owner: tuple[str, str] | None = None) -> JobReport:
        """The full report with findings; from the archive once Prometheus has lost the
        job (unless ``archive_fallback`` is False: what the archiver itself builds).
        ``resolution``: the series' (``plot``, or ``full`` for MAX_POINTS per series);
        ``sizing``: look up the history of jobs like it for the next ``#SBATCH`` block;
        ``owner``: (user, job name) when the caller has them already, so that lookup
        starts before any source is read. Raises InvalidJobId, JobNotFound,
        SourceUnavailable."""
        jid = JobId.of(job_id)
        # The history lookup starts as soon as the owner and the name are known and runs
        # beside sacct, Prometheus and the rest; the report waits for it only at the end.
        started: dict[tuple[str, str], Future[SizingSuggestion | None]] = {}

        def start_sizing(user: str, name: str) -> None:
            if sizing and self.history is not None and (user, name) not in started:
                started[(user, name)] = self._sizing_lookup(self.history, user, name)

        if owner is not None:
            start_sizing(*owner)

        report = build_report(
            jid,
            self.settings.cluster,
            self.accounting,
            self.sacct,
            self.prometheus,
            strict_accounting=strict_accounting,
            resolution=resolution,
            partitions=self.partitions,
            on_owner=start_sizing,
            gpu_tres=self.gpu_tres,
        )
        if report.array_job == jid.job and jid.array_task is None:
            # The id names a whole array: its summary leads; the single figures are those
            # of one task (``figures_from``), whose peak the summary reuses as is.
            try:
                tasks = self.sacct.array(jid)
            except (JobNotFound, SourceUnavailable):
                tasks = ()
            if tasks:
                shown = {report.figures_from: report.memory_peak} if report.figures_from else {}
                summary = summarize_array(tasks, self.thresholds, peaks=shown)
                report = dataclasses.replace(report, array=summary)
        report = with_queue(report, self.cluster, self.queue_history,
                            note_after=self.settings.queue_note_seconds)
        report = with_node_events(report, self.accounting)
        report = self._derived(report, jid)
        suggestion, gap = self._sizing(report, started) if sizing else (None, None)
        report = dataclasses.replace(report, sizing=suggestion,
                                     gaps=report.gaps + ((gap,) if gap else ()))
        report = self.judged(report)
        if not archive_fallback:
            return report
        archived = with_archive_fallback(report, lambda: self.archive)
        return archived if archived is not report else self._jobstats_fallback(report, jid)

    def _jobstats_fallback(self, report: JobReport, jid: JobId) -> JobReport:
        """A job Prometheus lost and the archive lacks: the usage jobstats (or our sync)
        left in its AdminComment, judged again."""
        if not isinstance(self.sacct, AdminCommentReader):
            return report
        filled = with_jobstats_summary(report, self.sacct.admin_comment)
        if filled is report:
            return report
        filled = self._derived(filled, jid)
        return self.judged(filled)

    @property
    def policy(self) -> Policy:
        """The site's policy in force now (the last good one while an edit is broken)."""
        return self.policies.policy()

    def judged(self, report: JobReport) -> JobReport:
        """The report's findings under the site's policy, and its audit section."""
        policy = self.policy
        findings, resolved = judge(report, self.thresholds, policy)
        return audited(dataclasses.replace(report, findings=findings), resolved.thresholds,
                       self.settings.min_coverage, self.gpu_metrics,
                       policy_version=policy.version, site_thresholds=self.thresholds)

    def _derived(self, report: JobReport, jid: JobId) -> JobReport:
        """The steps table, the samples' coverage and the waste: computed once, here."""
        coverage = None
        reader = self.prometheus
        if isinstance(reader, CoverageReader) and report.start_time and not report.usage.empty:
            metrics_id = report.metrics_ids or JobId.of(report.metrics_id or str(jid))
            try:
                coverage = reader.coverage(metrics_id, report.start_time,
                                           report.end_time or datetime.now(UTC), report.nodes)
            except SourceUnavailable as exc:
                log.info("job %s: no coverage: %s", jid, exc.reason)
        weights: dict[str, float] = {}
        if isinstance(self.partitions, BillingWeightsReader) and report.partition:
            try:
                weights = self.partitions.billing_weights(report.partition)
            except SourceUnavailable as exc:
                log.info("partition %s: %s (%s)", report.partition, exc.reason, exc.detail)
        report = dataclasses.replace(report, step_lines=step_lines(report), coverage=coverage)
        waste = compute_waste(report, weights, self.settings.core_hours_per_billing_unit)
        return dataclasses.replace(report, waste=waste, energy=self._energy(report))

    def _energy(self, report: JobReport) -> Energy | None:
        """The job's energy and carbon; a site's intensity series that cannot be read
        leaves the carbon figure unknown, the energy stands."""
        if report.usage.energy_joules is None:
            return None
        try:
            vector = self.prometheus.vector if isinstance(self.prometheus, VectorReader) else None
            intensity = intensity_for(self.settings.carbon_intensity, report, vector,
                                      self.settings.carbon_country)
        except SourceUnavailable as exc:
            log.info("job %s: no carbon intensity: %s", report.job_id, exc.reason)
            intensity = Intensity(None, "unavailable: " + exc.reason)
        return compute_energy(report, intensity)

    def _sizing_lookup(self, source: HistorySource, user: str, name: str
                       ) -> Future[SizingSuggestion | None]:
        """The ``#SBATCH`` block from ``user``'s jobs named ``name`` (last 30 days), kept
        or started on the sizing pool."""
        thresholds = self.thresholds
        return self.sizing_cache.get(
            (self.settings.cluster, user, name),
            lambda: history(source, user, name, thresholds=thresholds).sizing)

    def _sizing(self, report: JobReport,
                started: dict[tuple[str, str], Future[SizingSuggestion | None]]
                ) -> tuple[SizingSuggestion | None, Gap | None]:
        """(the block, None), or (None, the gap saying why there is none) when the history
        cannot be read: the report stands either way. (None, None) without a history, or
        when the report already has a gap of the source that failed."""
        if self.history is None or not report.user or not report.job_name:
            return None, None
        key = (report.user, report.job_name)
        future = started.get(key) or self._sizing_lookup(self.history, *key)
        try:
            return future.result(), None
        except SourceUnavailable as exc:
            log.info("job %s: no history for the sizing block: %s", report.job_id, exc.reason)
            if any(g.source == exc.source for g in report.gaps):
                return None, None  # one outage, one note: the report already names it
            reason = UNAVAILABLE.format(source=exc.source, reason=exc.reason)
            return None, Gap(GAP_SOURCE, reason, exc.detail)

    def owner(self, job_id: JobId | str) -> str | None:
        """The job's owner from the accounting view: one cheap query, for access checks
        before a report is built. Raises InvalidJobId, JobNotFound, SourceUnavailable."""
        return self.holder(job_id)[0]

    def holder(self, job_id: JobId | str) -> tuple[str | None, str | None]:
        """(owner, account) of the job, as ``owner``: its account's coordinators may see it."""
        job = self.accounting.job(JobId.of(job_id))
        return job.user, job.account

    def job_ids(self, user: str, since: datetime) -> frozenset[str]:
        """Slurm's own ids (as the exporters label series: ``jobid``) of ``user``'s jobs
        that ended at or after ``since`` or have not ended, the newest ``LIST_LIMIT``: what
        the Prometheus front lets a user's job picker list. Raises SourceUnavailable."""
        jobs = self._listing().accounting.recent(since, user=user)
        return frozenset(str(j.job) for j in jobs)

    def job_list(self, since: datetime, now: datetime, user: str | None = None,
                 account: str | None = None) -> tuple[list[JobRow], list[str]]:
        """One user's (or account's) recent jobs with the report's figures, and the plain
        notes on what was missing. Raises SourceUnavailable when the accounting view fails."""
        src = self._listing()
        return list_jobs(src, since, now, user=user, account=account), src.gaps

    def _listing(self) -> ListSources:
        # Every real source lists (the view, sacct, slurmrestd, Prometheus: their classes
        # satisfy these protocols, which mypy checks where they are built); the service
        # is typed by what a report needs, which a test's stand-in for one report meets.
        return ListSources(cast(RecentJobsReader[AccountingJob], self.accounting),
                           cast(RecentJobsReader[SacctJob], self.sacct),
                           cast(VectorReader, self.prometheus),
                           archived_report(lambda: self.archive))

    def ended_jobs(self, since: datetime) -> list[str]:
        """Ids of the jobs that ended at or after ``since``, oldest first."""
        return self.accounting.ended_since(since)
