"""The weekly digest's line of each archived job, one narrow row each
(``archive_digest_jobs``, revision 6), and a week's digests read from those rows.

``Archive.put`` writes a job's row beside its record: the figures ``week_sums.job_waste``
computes from the whole summary (``webapp.unused``: what the job's page says), its name,
state and account, and the names of its findings. A week of a large site (700,000 jobs
of 5,000 users) is then read in one pass over ~100 bytes a job: one query for the jobs
of each ``USERS_PER_QUERY`` users (whether the daily cap folded each job's email joined
from ``mail_log``) and one for the message and advice of each of those users' most
common finding, the one part of a summary a digest quotes. The queries grow with the
users / 500, never one a user, and the summaries parsed with the users, never the jobs.

Not ``archive_staff_jobs``: it holds no job names or findings, its GPU figure is the
report's over the full-resolution series where a digest's (and the archived page's) is
the archived series', and jobs archived before the sync wrote staff rows have none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from webapp.archive.db import Database
from webapp.archive.mail_state import FOLDED
from webapp.archive.record import ArchivedJob
from webapp.archive.week_sums import Digest, JobWaste, job_waste, quoted, top_finding
from webapp.json_codec import Json

COLUMNS = ("cluster", "job_id", "submit_time", "end_time", "user_name", "state", "job_name",
           "account", "elapsed", "cpu_hours", "gpu_hours", "memory_gib_hours", "energy_kwh",
           "findings")
USERS_PER_QUERY = 500
SEPARATOR = ","  # between a job's finding names (detector names: letters and underscores)


def digest_row(job: ArchivedJob) -> tuple[Any, ...]:
    """The row of one archived job (``COLUMNS``), its figures ``job_waste``'s."""
    line = job_waste(job)
    return (job.cluster, job.job_id, job.submit_time, job.end_time, job.user, job.state,
            line.job_name, line.account, line.elapsed_seconds, line.cpu_hours,
            line.gpu_hours, line.memory_gib_hours, line.energy_kwh,
            SEPARATOR.join(line.findings))


class DigestRows:
    """``archive_digest_jobs`` of an open archive database. Windows are [since, until],
    as the rest of the archive's."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, rows: Iterable[Sequence[Any]]) -> None:
        """Insert rows (``COLUMNS``), keeping any already there."""
        values = [tuple(r) for r in rows]
        if values:
            self.db.execute_many(
                f"{self.db.dialect.insert_ignore} INTO archive_digest_jobs"
                f" ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})", values)

    def delete(self, cluster: str, job_id: str, submit_time: int) -> None:
        self.db.execute("DELETE FROM archive_digest_jobs WHERE cluster = ? AND job_id = ?"
                        " AND submit_time = ?", (cluster, job_id, submit_time))

    def count(self, cluster: str, since: int, until: int) -> int:
        return int(self.db.query("SELECT COUNT(*) FROM archive_digest_jobs WHERE cluster = ?"
                                 " AND end_time >= ? AND end_time <= ?",
                                 (cluster, since, until))[0][0])

    def users(self, cluster: str, since: int, until: int) -> list[str]:
        """The users with jobs that ended in [since, until], sorted."""
        rows = self.db.query("SELECT DISTINCT user_name FROM archive_digest_jobs WHERE"
                             " cluster = ? AND end_time >= ? AND end_time <= ? AND"
                             " user_name IS NOT NULL", (cluster, since, until))
        return sorted(r[0] for r in rows)

    def digests(self, cluster: str, users: Sequence[str], since: int,
                until: int) -> Iterator[Digest]:
        """The digest of each of ``users`` (in that order) over their jobs that ended in
        [since, until]; a ``Digest``'s own ``until`` is the end of the week, one after."""
        for first in range(0, len(users), USERS_PER_QUERY):
            chunk = users[first:first + USERS_PER_QUERY]
            lines = self._lines(cluster, chunk, since, until)
            tops = {u: top for u in chunk if (top := top_finding(lines.get(u, ()))) is not None}
            told = self._findings(cluster, [(t[2].job_id, t[2].submit_time)
                                            for t in tops.values()])
            for user in chunk:
                jobs = tuple(lines.pop(user, ()))
                if user not in tops:
                    yield Digest(cluster, user, since, until + 1, jobs)
                    continue
                name, n, latest = tops[user]
                yield Digest(cluster, user, since, until + 1, jobs, name, n,
                             *quoted(told.get((latest.job_id, latest.submit_time), ()), name))

    def _lines(self, cluster: str, users: Sequence[str], since: int,
               until: int) -> dict[str, list[JobWaste]]:
        """Each of ``users``' jobs that ended in [since, until], oldest first: one query."""
        rows = self.db.query(
            "SELECT d.user_name, d.job_id, d.submit_time, d.end_time, d.state, d.job_name,"  # noqa: S608
            " d.account, d.elapsed, d.cpu_hours, d.gpu_hours, d.memory_gib_hours,"
            " d.energy_kwh, d.findings, EXISTS (SELECT 1 FROM mail_log m WHERE"
            " m.cluster = d.cluster AND m.job_id = d.job_id AND m.submit_time = d.submit_time"
            " AND m.kind = ?) FROM archive_digest_jobs d WHERE d.cluster = ? AND"
            " d.end_time >= ? AND d.end_time <= ? AND d.user_name IN"
            f" ({', '.join('?' for _ in users)}) ORDER BY d.user_name, d.end_time, d.job_id",
            [FOLDED, cluster, since, until, *users])
        out: dict[str, list[JobWaste]] = {}
        for (user, job_id, submit, end, state, name, account, elapsed, cpu, gpu, memory,
             kwh, findings, folded) in rows:
            out.setdefault(user, []).append(JobWaste(
                job_id, name, state, int(end), None if elapsed is None else float(elapsed),
                float(cpu), float(gpu), float(memory),
                tuple(findings.split(SEPARATOR)) if findings else (), bool(folded), account,
                None if kwh is None else float(kwh), int(submit)))
        return out

    def _findings(self, cluster: str,
                  keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], list[Json]]:
        """(job id, submit time) -> the archived summary's findings, for ``keys``: one
        query a few hundred jobs, by the archive's primary key."""
        wanted = set(keys)
        rows = self.db.query_in("SELECT job_id, submit_time, JSON_EXTRACT(summary,"
                                " '$.findings') FROM archive_jobs WHERE cluster = ? AND"
                                " job_id IN ({})", [cluster], sorted({j for j, _ in wanted}))
        return {(job_id, int(submit)): json.loads(findings)
                for job_id, submit, findings in rows
                if findings is not None and (job_id, int(submit)) in wanted}
