"""One sync run: per stream (archive, email) a watermark in the archive; the jobs whose
end lies in [watermark - look-back, now] (JOBREPORT_SYNC_LOOKBACK) not in the sync log,
oldest first, at most ``limit`` per stream; each processed in order, and the watermark
moved to the last one processed (never to "now", never back), so a limit, an error or a
kill skips nothing. The look-back finds the jobs whose end record reached slurmdbd after
a later-ending job was processed (slurmdbd down or behind, slurmctld's agent queue
busy). Every step is keyed by (cluster, job id, submit time): a second run, or a second
copy at once, does nothing twice.

An unavailable source stops the run (every later job would fail alike), and so does a
full disk under the archive or the outbox (``disk_full``: the error names the file and
its free space; the watermark stays before the job, which the next run processes once
there is room again). Any other error
is one job's: it is logged and counted, the run goes on with the next job, and the
stream's watermark stays before the failed job, so later runs retry it (the jobs after it
are in the sync log and are not done twice). After ``RETRY_SECONDS`` and at least
``RETRY_ATTEMPTS`` failed runs the job is logged as failed for good and the watermark
moves on; ``jobreport sync --jobid`` processes it again by hand.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from tqdm import tqdm

from jobreport_common.sqlite_file import disk_full, sqlite_path
from webapp.archive.db import ArchiveBusy
from webapp.archive.mail_state import MailState
from webapp.archive.staff_rows import StaffRows
from webapp.archive.store import Archive
from webapp.archive.sync_state import GIVEN_UP, LastRun, SyncState
from webapp.mail.chat import Notify, apprise_notify, deliver_chat
from webapp.mail.outbox import Outbox, OutboxBusy, deliver
from webapp.mail.owner import file_opt_outs, queue_owner_email
from webapp.mail.sending import Connect, smtp_connect
from webapp.migrations import OUTBOX, check
from webapp.model import JobId, JobNotFound, JobReport, SourceUnavailable
from webapp.report.archived import archive_record
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.accounting import is_stand_in
from webapp.sources.ended import EndedJob, SacctEnded
from webapp.staff.archived import report_staff_job, staff_row
from webapp.sync.admin_comment import comment_writer_from, write_summary
from webapp.sync.bulk import BATCH, prefetch
from webapp.sync.metrics import write_metrics
from webapp.sync.options import DIRECTIONS, SyncOptions
from webapp.sync.status import read_status

log = logging.getLogger(__name__)
# Seconds to wait for a job's full accounting record, from the run that first met its
# stand-in (not from its end: a job whose end arrived late is met long after it).
STAND_IN_WAIT = 600
# A failing job holds its stream's watermark this long, and for at least this many runs
# (the timer runs every minute): a passing fault (a full disk, a broken TeX upgrade)
# costs no job its report, and the backlog a held watermark re-reads stays hours long.
RETRY_SECONDS = 6 * 3600
RETRY_ATTEMPTS = 5
FAILED = GIVEN_UP  # the sync log's outcome of a job given up on
ERROR_SHOWN = 200  # characters of an error in the run's summary (the log has it all)


@dataclass(frozen=True)
class JobFailure:
    """One job a run failed on: its streams, the error, and whether retries are over."""

    job_id: str
    streams: tuple[str, ...]
    error: str
    attempts: int  # failed runs so far (0 for a ``--jobid`` run, which keeps no count)
    given_up: bool


@dataclass
class SyncResult:
    """What a run did: outcomes per stream, watermarks after it, and why it stopped."""

    selected: list[EndedJob] = field(default_factory=list)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    watermarks: dict[str, int | None] = field(default_factory=dict)
    delivery: Counter[str] = field(default_factory=Counter)
    chat: Counter[str] = field(default_factory=Counter)  # chat notices: sent, deferred, failed
    pruned: int = 0
    source: str = "accounting"
    busy: str | None = None
    error: str | None = None  # the job that stopped the run, and why
    failed: list[JobFailure] = field(default_factory=list)
    held: set[str] = field(default_factory=set)  # streams whose watermark waits for a retry
    todo: dict[str, list[EndedJob]] = field(default_factory=dict)  # per stream, as selected


class Syncer:
    """The sync's parts wired from settings; each is injectable for tests."""

    def __init__(self, settings: Settings, service: ReportService | None = None,
                 archive: Archive | None = None, connect: Connect | None = None,
                 notify: Notify = apprise_notify) -> None:
        self.settings = settings
        self.cluster = settings.cluster
        # Both schemas checked at the start, not at the first email: an older one stops
        # the run, naming `jobreport db-upgrade`.
        check(OUTBOX, settings.outbox)
        self.archive = archive or Archive(settings.archive_url)
        self.service = service or ReportService(settings, archive=self.archive)
        self.connect = connect or smtp_connect(settings)
        self.notify = notify
        self.sacct = SacctEnded(settings.sacct, settings.cluster, settings.sacct_timeout)
        self.mail = MailState(self.archive.db, self.archive.clock)
        self.state = SyncState(self.archive.db, self.archive.clock)
        self.comments = comment_writer_from(settings)  # None unless JOBREPORT_ADMIN_COMMENT
        self._retrying: set[tuple[str, str, int]] = set()  # (stream, job id, submit time)
        self._since: dict[str, int] = {}  # stream -> where this run began looking

    def close(self) -> None:
        self.archive.close()

    def files(self) -> dict[str, str | None]:
        """The SQLite files a run writes (what -> path; None for a MariaDB archive)."""
        return sync_files(self.settings)

    def _ended(self, since: int, until: int, limit: int, result: SyncResult) -> list[EndedJob]:
        try:
            return self.service.accounting.ended_between(since, until, limit)
        except SourceUnavailable as exc:
            log.warning("accounting view unavailable (%s); asking sacct", exc.reason)
            result.source = "sacct"
            return self.sacct.ended_between(since, until, limit)

    def select(self, opts: SyncOptions, now: int, result: SyncResult) -> dict[str, list[EndedJob]]:
        """Per stream, the jobs still to process, oldest end first, at most ``limit``."""
        todo: dict[str, list[EndedJob]] = {}
        for stream in DIRECTIONS[opts.direction]:
            mark = self.archive.watermark(self.cluster, stream)
            # At least 1 s back: jobs that ended in the watermark's own second; never
            # before where the stream began (its first run's --max-span).
            back = max(int(self.settings.sync_lookback), 1)
            if mark is None:
                since = now - int(opts.max_span)
            else:
                origin = self.archive.origin(self.cluster, stream)
                since = mark - back if origin is None else max(mark - back,
                                                               min(origin, mark - 1))
            if self.settings.archive_retention_days > 0:
                # Never before what the sync log still holds: a pruned job would be new.
                since = max(since, now - int(self.settings.archive_retention_days * 86400))
            # The window's done jobs (sync_log_end): the view's oldest limit + len(done)
            # rows of the window then hold the ``limit`` oldest not done, if there are so many.
            done = self.archive.done(self.cluster, stream, since)
            found = self._ended(since, now, opts.limit + len(done), result)
            todo[stream] = [j for j in found if j.key not in done][: opts.limit]
            self._since[stream] = since
        return todo

    def run(self, opts: SyncOptions, clock: Callable[[], float] = time.time) -> SyncResult:
        result = SyncResult()
        try:
            with self.archive.sync_lock(self.cluster):
                started = clock()
                try:
                    self._run_locked(opts, int(started), result)
                except Exception as exc:
                    result.error = result.error or f"{type(exc).__name__}: {exc}"
                    raise
                finally:
                    if not (opts.dry_run or opts.job_id):
                        try:
                            self._record(opts, started, clock(), result)
                        except Exception as exc:
                            # The run's own outcome stands; a stale record shows its age.
                            full = disk_full(exc, self.files())
                            if full:
                                log.warning("cannot record the run for --status: %s", full)
                            else:
                                log.exception("cannot record the run for --status")
        except ArchiveBusy as exc:
            result.busy = str(exc)
        return result

    def _record(self, opts: SyncOptions, started: float, finished: float,
                result: SyncResult) -> None:
        """The run as each stream's last (``--status``), and the metrics file."""
        for stream in DIRECTIONS[opts.direction]:
            counts = {k: int(v) for k, v in result.outcomes.get(stream, Counter()).items() if v}
            self.state.record_run(self.cluster, stream, LastRun(
                started, finished, result.source, len(result.todo.get(stream, ())), counts,
                result.error))
        if self.settings.metrics_textfile_dir:
            write_metrics(self.settings.metrics_textfile_dir, self.cluster,
                          read_status(self.state, [self.cluster], finished))

    def _run_locked(self, opts: SyncOptions, now: int, result: SyncResult) -> None:
        todo = self.one(opts.job_id) if opts.job_id else self.select(opts, now, result)
        result.todo = todo
        jobs = sorted({j for stream_jobs in todo.values() for j in stream_jobs})
        result.selected = jobs
        result.outcomes = {stream: Counter() for stream in todo}
        self._retrying = {(stream, job_id, submit)
                          for stream in todo
                          for job_id, submit, _, _ in self.archive.failures(self.cluster, stream)}
        if not opts.dry_run:
            opt_out = file_opt_outs(self.settings)
            outbox = (Outbox(self.settings.outbox,
                             metrics_dir=self.settings.metrics_textfile_dir)
                      if "email" in todo else None)
            try:
                bar = tqdm(total=len(jobs), unit="job", desc="sync", disable=None)
                for i in range(0, len(jobs), BATCH):
                    batch = jobs[i : i + BATCH]
                    # One set of bulk queries for the batch; each report reads from them.
                    service = prefetch(self.service, batch)
                    if not self._batch(batch, todo, opts, service, outbox, opt_out, result,
                                       bar):
                        break
                bar.close()
                if outbox is not None and not opts.no_deliver:
                    result.delivery, result.chat = _deliver(outbox, self.connect,
                                                            self.notify)
            finally:
                if outbox is not None:
                    outbox.close()
            if "archive" in todo and not opts.job_id:
                result.pruned = self.archive.prune(self.cluster,
                                                   self.settings.archive_retention_days)
        result.watermarks = {s: self.archive.watermark(self.cluster, s) for s in todo}

    def _batch(self, batch: list[EndedJob], todo: dict[str, list[EndedJob]],
               opts: SyncOptions, service: ReportService, outbox: Outbox | None,
               opt_out: frozenset[str], result: SyncResult, bar: tqdm[NoReturn]) -> bool:
        """Process a batch in end order; False when a job stopped the run."""
        for job in batch:
            streams = [s for s in todo if job in todo[s]]
            finished: list[str] = []
            try:
                self._process(job, streams, opts, outbox, opt_out, result, service, finished)
            except (JobNotFound, SourceUnavailable) as exc:
                # Stop here: the watermark stays before this job, the next run
                # tries it again. Skipping it would lose it for good.
                result.error = f"job {job.job_id}: {exc}"
                log.error("%s", result.error)
                return False
            except Exception as exc:
                full = disk_full(exc, self.files())
                if full:
                    # Every later job would fail alike: stop, the watermark before this job.
                    result.error = f"job {job.job_id}: {full}"
                    log.error("%s", result.error)
                    return False
                # One job's fault (its text, a renderer's bug) must not stop every later
                # job, other users' included: count it, retry it, go on.
                self._failed(job, [s for s in streams if s not in finished], exc, opts, result)
            bar.update()
        return True

    def _failed(self, job: EndedJob, streams: list[str], exc: Exception, opts: SyncOptions,
                result: SyncResult) -> None:
        error = f"{type(exc).__name__}: {exc}"
        log.error("job %s failed (%s): %s", job.job_id, ", ".join(streams), error,
                  exc_info=exc)
        attempts, given_up = 0, False
        for stream in streams:
            result.outcomes[stream][FAILED] += 1
            if opts.job_id:
                continue  # by hand: no watermark to hold, no retries to count
            attempts, first = self.archive.failed(self.cluster, stream, job.job_id,
                                                  job.submit_time, job.end_time, error)
            given_up = (attempts >= RETRY_ATTEMPTS
                        and self.archive.clock() - first >= RETRY_SECONDS)
            if not given_up:
                result.held.add(stream)  # later jobs are logged; the watermark waits
                continue
            log.error("job %s: %s given up after %d failed runs; `jobreport sync --jobid %s`"
                      " tries it again", job.job_id, stream, attempts, job.job_id)
            self.archive.log(self.cluster, stream, job.job_id, job.submit_time,
                             job.end_time, FAILED)
            self.archive.forget_failure(self.cluster, stream, job.job_id, job.submit_time)
            if stream not in result.held:
                self.archive.advance(self.cluster, stream, job.end_time,
                                     self._since.get(stream))
        result.failed.append(JobFailure(job.job_id, tuple(streams), error, attempts, given_up))

    def one(self, job_id: str) -> dict[str, list[EndedJob]]:
        """``--jobid``: the job (any end time), for every stream, processed again."""
        acct = self.service.accounting.job(JobId.parse(job_id))
        if acct.end_time is None:
            return {}
        job = EndedJob(int(acct.end_time.timestamp()), acct.job_id,
                       int(acct.submit_time.timestamp()) if acct.submit_time else 0,
                       self.cluster)
        return {"archive": [job], "email": [job]}

    def _process(self, job: EndedJob, streams: list[str], opts: SyncOptions,
                 outbox: Outbox | None, opt_out: frozenset[str], result: SyncResult,
                 service: ReportService | None = None,
                 finished: list[str] | None = None) -> None:
        """Archive and/or email one job; ``finished`` collects the streams done with it."""
        service = service or self.service
        report = service.build(job.job_id, archive_fallback="archive" not in streams)
        if is_stand_in(report.uid, report.account, report.job_name, report.partition):
            # slurmdbd has the job's end but not yet its start record (owner, name,
            # request): wait for it rather than archive and email a job of nobody's.
            # A start record lost for good is archived as it is, once the wait is over.
            first = self.state.stand_in_seen(self.cluster, job.job_id, job.submit_time,
                                             job.end_time)
            if self.archive.clock() - first < STAND_IN_WAIT:
                raise SourceUnavailable("accounting", "only slurmdbd's stand-in record so far"
                                        " (no owner, name or request yet)")
            log.warning("job %s: archived from slurmdbd's stand-in record", job.job_id)
        self.state.forget_stand_in(self.cluster, job.job_id, job.submit_time)  # if any
        for stream in streams:
            if stream == "archive":
                outcome = self._archive(job, report, replace=bool(opts.job_id))
                if self.comments is not None:
                    write_summary(self.comments, job, report, self.settings.scrape_interval)
            else:
                assert outbox is not None
                outcome = queue_owner_email(report, job.job_id, job.submit_time,
                                            self.settings, self.mail, outbox, opt_out)
            result.outcomes[stream][outcome] += 1
            self.archive.log(self.cluster, stream, job.job_id, job.submit_time, job.end_time,
                             outcome)
            if (stream, job.job_id, job.submit_time) in self._retrying:
                self.archive.forget_failure(self.cluster, stream, job.job_id, job.submit_time)
            if not opts.job_id and stream not in result.held:
                self.archive.advance(self.cluster, stream, job.end_time,
                                     self._since.get(stream))
            if finished is not None:
                finished.append(stream)

    def _archive(self, job: EndedJob, report: JobReport, replace: bool) -> str:
        """The report, and the job's staff row (``staff-report --from-archive`` reads
        those, so no daily ``--record`` is needed); both keyed as the job was selected."""
        record = archive_record(report, job.submit_time, job.end_time)
        row = staff_row(report.cluster, report_staff_job(report, job.submit_time,
                                                         job.end_time))
        rows = StaffRows(self.archive.db)
        if replace:
            rows.replace([row])
            return "archived again" if self.archive.replace(record) else "archived"
        # Written even when the report was there already: a run killed between the two
        # leaves the row to the next one.
        outcome = "archived" if self.archive.put(record) else "already archived"
        rows.put([row])
        return outcome


def sync_files(settings: Settings) -> dict[str, str | None]:
    """The SQLite files a sync writes: its archive (None for MariaDB) and its outbox."""
    return {"archive": sqlite_path(settings.archive_url), "outbox": settings.outbox}


def _deliver(outbox: Outbox, connect: Connect, notify: Notify) -> tuple[Counter[str], Counter[str]]:
    """The emails, then the chat notices: (email counts, chat counts)."""
    try:
        with outbox.lock():
            return deliver(outbox, connect), deliver_chat(outbox, notify)
    except OutboxBusy:
        # The run holding it (a sync, or a send by hand) sends ours too.
        return Counter(), Counter()
