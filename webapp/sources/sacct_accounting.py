"""The accounting record of one job (or of a user's recent jobs) as ``sacct`` shows it
to whoever runs it.

On a login node an ordinary user cannot read the accounting view (its password is the
service user's): the command line then asks ``sacct`` as the caller, so Slurm itself
decides what they may see (``PrivateData``). This reader gives the report builder the same
``AccountingJob`` the view would (identity, request, times with the submit time, uid),
so a user's own report has no gap.
"""

from __future__ import annotations

from datetime import UTC, datetime

from webapp.model import AccountingJob, JobId, JobNotFound, SacctJob, SourceUnavailable
from webapp.sources.accounting import LIST_LIMIT
from webapp.sources.ended import EndedJob
from webapp.sources.history_data import parse_submits
from webapp.sources.sacct import LIST_FIELDS, SacctSource, parse_sacct
from webapp.sources.sacct_records import delimiter_of, split_records
from webapp.sources.sacct_values import parse_nodelist

# No free text in these columns.
EXTRA_FIELDS = ("JobIDRaw", "UID", "Submit")
# A job list's columns: the view's list's (no free text), then the name, which only sacct
# gives a caller without the view (line breaks and all), and Submit last.
NAMED_LIST_FIELDS = (*LIST_FIELDS, "JobName", "Submit")


def parse_extra(text: str, delimiter: str = "|") -> dict[str, tuple[int | None, datetime | None]]:
    """JobIDRaw -> (uid, submit time) from ``sacct -X -n -P -o JobIDRaw,UID,Submit``
    with ``SLURM_TIME_FORMAT=%s``:

        42|1001|1795434160
        43|1002|Unknown
    """
    out: dict[str, tuple[int | None, datetime | None]] = {}
    for raw, uid, submit in split_records(text, len(EXTRA_FIELDS), delimiter):
        out[raw] = (int(uid) if uid.isdigit() else None,
                    datetime.fromtimestamp(int(submit), UTC) if submit.isdigit() else None)
    return out


def _ids(job_id: str) -> tuple[int | None, int | None, int | None, int | None]:
    """(array job, array task, het job, het offset) of sacct's ``123_4`` / ``123+1``."""
    head, _, task = job_id.partition("_")
    if task.isdigit() and head.isdigit():
        return int(head), int(task), None, None
    head, _, offset = job_id.partition("+")
    if offset.isdigit() and head.isdigit():
        return None, None, int(head), int(offset)
    return None, None, None, None


def accounting_job(sj: SacctJob, cluster: str, uid: int | None,
                   submit: datetime | None) -> AccountingJob:
    """The view's record of a job, built from what sacct showed of it."""
    array_job, array_task, het_job, het_offset = _ids(sj.job_id)
    raw = sj.raw_id or sj.job_id
    try:
        nodes = parse_nodelist(sj.node_list) if sj.node_list else ()
    except ValueError:
        nodes = ()
    return AccountingJob(
        cluster=cluster, job_id=sj.job_id, job=int(raw) if raw.isdigit() else 0,
        array_job=array_job, array_task=array_task, het_job=het_job, het_offset=het_offset,
        uid=uid if uid is not None else -1, user=sj.user, account=sj.account,
        partition=sj.partition, job_name=sj.job_name, state=sj.state,
        exit_code=sj.exit_code, submit_time=submit, start_time=sj.start_time,
        end_time=sj.end_time, cpus=sj.cpus, memory_requested_bytes=sj.memory_requested_bytes,
        time_limit_seconds=sj.time_limit_seconds, nodes=tuple(nodes),
        node_list=sj.node_list, work_dir=sj.work_dir, gpus=sj.gpus,
        time_limit_kind=sj.time_limit_kind, qos=sj.qos,
    )


class SacctAccounting:
    """An AccountingReader for one job at a time, from sacct run as the caller."""

    name = "sacct"

    def __init__(self, sacct: SacctSource, cluster: str) -> None:
        self.sacct = sacct
        self.cluster = cluster

    def job(self, job_id: JobId) -> AccountingJob:
        sj = self.sacct.job(job_id)
        raw = sj.raw_id or sj.job_id
        argv = [*self.sacct.parsable(), "--allocations", "--allusers",
                "--format", ",".join(EXTRA_FIELDS), "--jobs", raw]
        if self.sacct.cluster:
            argv += ["--clusters", self.sacct.cluster]
        text = self.sacct.run(argv)
        uid, submit = parse_extra(text, delimiter_of(argv)).get(raw, (None, None))
        return accounting_job(sj, self.cluster, uid, submit)

    def ended_since(self, since: datetime) -> list[str]:
        raise SourceUnavailable("accounting", "not available from sacct")

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        raise SourceUnavailable("accounting", "not available from sacct")


class NoAccounting:
    """For another user's job: nothing beyond what the caller's sacct shows."""

    name = "accounting"

    def job(self, job_id: JobId) -> AccountingJob:
        raise JobNotFound(str(job_id))

    def ended_since(self, since: datetime) -> list[str]:
        return []

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        return []


class SacctJobList:
    """Both halves of a job list from ONE ``sacct`` call as the caller: ``recent()`` gives
    the rows the accounting view would (identity, request, submit time), ``figures`` the
    same answer's jobs with their steps (CPU time, MaxRSS). For whoever cannot read the
    view (a login node's user); the list code reads it exactly as it reads the view."""

    name = "sacct"

    def __init__(self, sacct: SacctSource, cluster: str) -> None:
        self.sacct = sacct
        self.cluster = cluster
        self.figures = _ListFigures(self)
        self._answers: dict[tuple[datetime, str | None, str | None],
                            list[tuple[SacctJob, datetime | None]]] = {}

    def answer(self, since: datetime, user: str | None,
               account: str | None) -> list[tuple[SacctJob, datetime | None]]:
        """(job, submit time) of every job sacct lists, asked once per window and owner."""
        key = (since, user, account)
        if key not in self._answers:
            argv = self.sacct.recent_argv(since, user, account, fields=NAMED_LIST_FIELDS)
            text, d = self.sacct.run(argv), delimiter_of(argv)
            submits = parse_submits(text, NAMED_LIST_FIELDS, d)
            self._answers[key] = [
                (j, datetime.fromtimestamp(submits[j.job_id], UTC)
                 if j.job_id in submits else None)
                for j in parse_sacct(text, NAMED_LIST_FIELDS, delimiter=d)]
        return self._answers[key]

    def recent(self, since: datetime, user: str | None = None, account: str | None = None,
               limit: int = LIST_LIMIT) -> list[AccountingJob]:
        """The view's ``recent()``: newest submission first, at most ``limit``."""
        if (user is None) == (account is None):
            raise ValueError("give a user or an account")
        jobs = [accounting_job(j, self.cluster, None, submit)
                for j, submit in self.answer(since, user, account)]
        jobs.sort(key=lambda j: (j.submit_time is not None, j.submit_time, j.job_id),
                  reverse=True)
        return jobs[:limit]


class _ListFigures:
    """The sacct half of a SacctJobList: the answer its ``recent()`` already read."""

    name = "sacct"

    def __init__(self, listing: SacctJobList) -> None:
        self.listing = listing

    def recent(self, since: datetime, user: str | None = None,
               account: str | None = None) -> tuple[SacctJob, ...]:
        return tuple(j for j, _ in self.listing.answer(since, user, account))
