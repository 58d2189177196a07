"""One `jobreport watch` run: every running job sampled over the rules' windows, each
new (job, rule) alert emailed once, the policy applied, the outbox delivered.

"Once per job and condition" is the outbox's unique key
``watch:<cluster>:<job>:<submit>:<rule>``: a second run finds the key and sends nothing.
The email is queued before the alert is recorded for the user's history, and both
inserts ignore a key already there, so a run killed between the two is completed by the
next one, never duplicated. The whole run holds the outbox lock: runs never overlap.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tqdm import tqdm

from webapp.detectors.policy import PolicyError
from webapp.formatting import format_duration
from webapp.mail.outbox import Outbox, OutboxBusy, Sender, deliver
from webapp.mail.policy import owner_address, usable_address
from webapp.mail.smtp import SmtpSender
from webapp.model import AccountingJob, JobReport, SourceUnavailable
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource
from webapp.sources.from_settings import prometheus_from
from webapp.sources.live import LiveSource, Windows
from webapp.thresholds import Thresholds
from webapp.watch import message
from webapp.watch.enforce import Canceller, Decision, alert_key, cancel_key, decide, run_scancel
from webapp.watch.enforcement import Enforcement, enforcement_in_force, watch_scope
from webapp.watch.rules import Alert, evaluate
from webapp.watch_records import AlertLog, ordinal

log = logging.getLogger(__name__)
DAY = 86400.0


@dataclass
class WatchResult:
    """``alerts``: (alert, outcome) with outcome ``queued``, ``sent before``, ``would
    send`` or ``no address``; ``decisions``: what enforcement did."""

    jobs: int = 0
    alerts: list[tuple[Alert, str]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    delivery: Counter[str] = field(default_factory=Counter)
    busy: str | None = None
    enforcing: bool = False


def windows(thresholds: Thresholds) -> Windows:
    return Windows(thresholds.gpu_idle_seconds, thresholds.node_idle_seconds,
                   thresholds.memory_fit_seconds, thresholds.output_seconds,
                   thresholds.small_files_seconds)


class Watcher:
    """Sources, outbox and policy wired from settings; each injectable for tests."""

    def __init__(self, settings: Settings, *, running: Callable[[], list[AccountingJob]] | None
                 = None, live: LiveSource | None = None, canceller: Canceller | None = None,
                 connect: Callable[[], Sender] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.thresholds = settings.thresholds
        self.policy: Enforcement | None = None  # read at each run's start
        self.running = running or AccountingSource(settings.db_url, settings.cluster).running
        self.live = live or LiveSource(prometheus_from(settings))
        self.canceller = canceller or run_scancel
        self.connect = connect or (lambda: SmtpSender(settings))
        self.clock = clock

    def run(self, dry_run: bool = False, job_ids: Iterable[str] = (),
            deliver_now: bool = True) -> WatchResult:
        result = WatchResult()
        try:  # with the rest of the site policy, as it is now
            self.policy = enforcement_in_force(self.settings)
        except PolicyError as exc:  # the directory's: cancel nothing rather than guess
            self.policy = None
            result.errors.append("enforcement off: JOBREPORT_POLICY_DIR does not load: "
                                 + "; ".join(exc.problems))
        result.enforcing = self.policy is not None
        outbox = Outbox(self.settings.outbox, clock=self.clock,
                        metrics_dir=self.settings.metrics_textfile_dir)
        alerts_log = AlertLog(self.settings.outbox, clock=self.clock)
        try:
            with outbox.lock():
                self._run(outbox, alerts_log, result, dry_run, set(job_ids))
                if not dry_run:
                    self._enforce(outbox, alerts_log, result, dry_run=False, cancel=True)
                    if deliver_now:
                        result.delivery += deliver(outbox, self.connect)
        except OutboxBusy as exc:
            result.busy = str(exc)
        finally:
            alerts_log.close()
            outbox.close()
        return result

    def _run(self, outbox: Outbox, alerts_log: AlertLog, result: WatchResult, dry_run: bool,
             only: set[str]) -> None:
        jobs = [j for j in self.running() if not only or j.job_id in only]
        result.jobs = len(jobs)
        now = self.clock()
        w = windows(self.thresholds)
        for job in tqdm(jobs, unit="job", desc="watch", disable=None):
            try:
                sample = self.live.sample(job, now, w)
            except SourceUnavailable as exc:
                result.errors.append(f"job {job.job_id}: {exc}")
                continue
            for alert in evaluate(sample, self.thresholds):
                result.alerts.append((alert, self._notify(alert, outbox, alerts_log, now,
                                                          dry_run)))
        if dry_run:
            self._enforce(outbox, alerts_log, result, dry_run=True, cancel=False)

    def _notify(self, alert: Alert, outbox: Outbox, alerts_log: AlertLog, now: float,
                dry_run: bool) -> str:
        cluster, job = self.settings.cluster, alert.job
        key = alert_key(cluster, alert)
        if outbox.get(key) is not None:
            alerts_log.record_alert(key, cluster, job.user or "", job.job_id, alert.rule)
            return "sent before"
        if dry_run:
            return "would send"
        to_addr = owner_address(JobReport(job.job_id, cluster, user=job.user), self.settings)
        if not usable_address(to_addr):
            return "no address"
        earlier = len(alerts_log.alerts(now - message.NOTICE_DAYS * DAY, job.user or ""))
        grace = (self.policy.enforced(alert.rule, watch_scope(job)).grace_seconds
                 if self.policy else None)
        msg = message.render(alert, cluster, to_addr, self.settings.mail_from,
                             notice=ordinal(earlier + 1), enforced=grace is not None,
                             grace=format_duration(grace) if grace is not None else "",
                             policy_dir=self.settings.policy_dir)
        outbox.enqueue(key, job.job_id, f"watch:{alert.rule}", msg)
        alerts_log.record_alert(key, cluster, job.user or "", job.job_id, alert.rule)
        return "queued"

    def _enforce(self, outbox: Outbox, alerts_log: AlertLog, result: WatchResult, *,
                 dry_run: bool, cancel: bool) -> None:
        if self.policy is None:
            return
        now, cluster = self.clock(), self.settings.cluster
        for alert, _ in result.alerts:
            d = decide(alert, self.policy, outbox, alerts_log, cluster, now,
                       scancel=self.settings.scancel, canceller=self.canceller,
                       dry_run=dry_run or not cancel)
            if d is None:
                continue
            result.decisions.append(d)
            if d.outcome == "cancelled":
                self._cancel_email(d, outbox)

    def _cancel_email(self, d: Decision, outbox: Outbox) -> None:
        job, cluster = d.alert.job, self.settings.cluster
        to_addr = owner_address(JobReport(job.job_id, cluster, user=job.user), self.settings)
        if not usable_address(to_addr):
            return
        msg = message.render(d.alert, cluster, to_addr, self.settings.mail_from,
                             cancelled=True, grace=format_duration(d.grace_seconds),
                             policy_dir=self.settings.policy_dir)
        outbox.enqueue(cancel_key(cluster, d.alert), job.job_id, f"cancel:{d.alert.rule}", msg)
