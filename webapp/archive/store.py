"""The archive store: archived jobs, the sync's per-cluster watermarks and its log.

Keys are ``(cluster, job_id, submit_time)``: Slurm reuses job ids after a controller
reset, the submit time tells the two jobs apart. Every write is insert-if-new, so a
second sync (or two at once) never archives a job twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from webapp.archive.db import Database
from webapp.archive.digest_rows import DigestRows, digest_row
from webapp.archive.record import ArchivedJob
from webapp.archive.staff_rows import StaffRows, Window
from webapp.migrations import ARCHIVE, ready

STREAMS = ("archive", "email")
# Tables of one row per ended job, keyed by cluster and end time, that retention prunes:
# the report and its series first (``prune`` returns its count), then its digest line,
# staff row, sync log lines and failed attempts.
PRUNED = ("archive_jobs", "archive_digest_jobs", "archive_staff_jobs", "sync_log",
          "sync_failures")
ERROR_CHARS = 500  # of a failure's message kept for the next run's log


_JOB_COLUMNS = ("cluster, job_id, submit_time, end_time, user_name, state, resolution,"
                " summary, series, archived_at")


class Archive:
    """The archive at ``url`` (``sqlite:///path``, a bare path, or ``mysql://...``): a new,
    empty one is created; one whose schema is older than the code's is refused
    (``webapp.migrations.SchemaOutdated``, naming `jobreport db-upgrade`)."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time) -> None:
        self.db = Database(url)
        self.clock = clock
        try:
            ready(ARCHIVE, self.db.conn, self.db.dialect.name, url)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- jobs -------------------------------------------------------------------
    def put(self, job: ArchivedJob) -> bool:
        """Archive one job, and its line of the weekly digest (``digest_rows``); False
        when its key is already there. A line lost to a crash between the two is written
        by the next digest that covers the job (``fill_digest_rows``)."""
        line = digest_row(job)
        added = self.db.execute(
            f"{self.db.dialect.insert_ignore} INTO archive_jobs ({_JOB_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (job.cluster, job.job_id, job.submit_time, job.end_time, job.user, job.state,
             job.resolution, json.dumps(job.summary), json.dumps(job.series),
             job.archived_at),
        ) == 1
        DigestRows(self.db).put([line])
        return added

    def replace(self, job: ArchivedJob) -> bool:
        """Archive one job again (``--jobid``); True when it replaced an older record."""
        with self.db.transaction():
            removed = self.db.execute("DELETE FROM archive_jobs WHERE cluster = ? AND"
                                      " job_id = ? AND submit_time = ?",
                                      (job.cluster, job.job_id, job.submit_time))
            DigestRows(self.db).delete(job.cluster, job.job_id, job.submit_time)
            self.put(job)
        return removed > 0

    def get(self, cluster: str, job_id: str, submit_time: int | None = None) -> ArchivedJob | None:
        """The job's archived record (the latest submission when ``submit_time`` is None)."""
        sql = f"SELECT {_JOB_COLUMNS} FROM archive_jobs WHERE cluster = ? AND job_id = ?"  # noqa: S608
        params: list[Any] = [cluster, job_id]
        if submit_time is not None:
            sql += " AND submit_time = ?"
            params.append(submit_time)
        rows = self.db.query(sql + " ORDER BY submit_time DESC LIMIT 1", params)
        return _job(rows[0]) if rows else None

    def summaries(self, cluster: str,
                  keys: list[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
        """(job id, submit time) -> the archived summary, for the keys archived (one
        query: a page of a job list)."""
        # By id alone, on the primary key's (cluster, job_id), the submissions picked here:
        # an OR of (job_id, submit_time) pairs made SQLite scan the cluster's every row
        # (24 ms a page at 8,890 archived jobs, growing with the archive; 0.2 ms now).
        wanted = {(job_id, int(submit)) for job_id, submit in keys}
        rows = self.db.query_in("SELECT job_id, submit_time, summary FROM archive_jobs"
                                " WHERE cluster = ? AND job_id IN ({})", [cluster],
                                sorted({job_id for job_id, _ in wanted}))
        return {(job_id, int(submit)): json.loads(summary) for job_id, submit, summary in rows
                if (job_id, int(submit)) in wanted}

    def jobs(self, cluster: str, since: int = 0, until: int = 2**62,
             user: str | None = None) -> Iterator[ArchivedJob]:
        """Archived jobs that ended in [since, until], oldest first (optionally one user's)."""
        sql = (f"SELECT {_JOB_COLUMNS} FROM archive_jobs WHERE cluster = ?"  # noqa: S608
               " AND end_time >= ? AND end_time <= ?")
        params: list[Any] = [cluster, since, until]
        if user is not None:
            sql += " AND user_name = ?"
            params.append(user)
        for row in self.db.query(sql + " ORDER BY end_time, job_id", params):
            yield _job(row)

    def first_end(self, cluster: str) -> int | None:
        """When the oldest archived job ended (None: nothing archived)."""
        rows = self.db.query("SELECT MIN(end_time) FROM archive_jobs WHERE cluster = ?",
                             (cluster,))
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def rows_complete(self, cluster: str, since: int, until: int,
                      user: str | None = None) -> bool:
        """Every job archived in [since, until] (optionally one user's) has its staff row
        (jobs archived before the sync wrote rows have none until `staff-report --record`
        fills them in)."""
        rows = StaffRows(self.db)
        have = rows.count(Window(cluster, since, until)) if user is None else \
            rows.owner_count([cluster], "user", user, since, until)
        return have >= self.ended_count(cluster, since, until, user=user)

    def ended_count(self, cluster: str, since: int, until: int,
                    user: str | None = None) -> int:
        """How many archived jobs ended in [since, until] (optionally one user's)."""
        sql = "SELECT COUNT(*) FROM archive_jobs WHERE cluster = ? AND end_time >= ?" \
              " AND end_time <= ?"
        params: list[Any] = [cluster, since, until]
        if user is not None:
            sql += " AND user_name = ?"
            params.append(user)
        return int(self.db.query(sql, params)[0][0])

    def users(self, cluster: str, since: int, until: int) -> list[str]:
        """The users with archived jobs that ended in [since, until], sorted."""
        rows = self.db.query("SELECT DISTINCT user_name FROM archive_jobs WHERE cluster = ?"
                             " AND end_time >= ? AND end_time <= ? AND user_name IS NOT NULL",
                             (cluster, since, until))
        return sorted(r[0] for r in rows)

    def fill_digest_rows(self, cluster: str, since: int, until: int,
                         batch: int = 2000) -> int:
        """Write the digest line of each job that ended in [since, until] without one (jobs
        archived before revision 6, or a crash between a record and its line); rows
        written. The whole-week path of old, run once per job: the database extracts
        ``DIGEST_FIELDS`` from the summary and the GPUs' use (of jobs with GPUs) from the
        series, so Python parses a few dozen bytes a job, not the 3-9 KB record."""
        if DigestRows(self.db).count(cluster, since, until) >= \
                self.ended_count(cluster, since, until):
            return 0
        fields = ", ".join(f"JSON_EXTRACT(summary, '$.{path}')" for path in DIGEST_FIELDS)
        written, start = 0, since
        while True:
            # Oldest first from ``start``, the last batch's last end: jobs of that second
            # already written are skipped by the NOT EXISTS, so each batch moves on.
            rows = self.db.query(
                "SELECT cluster, job_id, submit_time, end_time, user_name, state, resolution,"  # noqa: S608
                f" JSON_ARRAY({fields}), CASE WHEN JSON_EXTRACT(summary, '$.gpus') > 0 THEN"
                " JSON_EXTRACT(series, '$.gpu_utilization') END, archived_at FROM archive_jobs a"
                " WHERE cluster = ? AND end_time >= ? AND end_time <= ? AND NOT EXISTS"
                " (SELECT 1 FROM archive_digest_jobs d WHERE d.cluster = a.cluster AND"
                " d.job_id = a.job_id AND d.submit_time = a.submit_time)"
                f" ORDER BY end_time LIMIT {int(batch)}", (cluster, start, until))
            DigestRows(self.db).put(digest_row(ArchivedJob(
                c, j, int(sub), int(end), u, st, float(res or 0),
                _digest_summary(json.loads(values)),
                {"gpu_utilization": json.loads(gpu or "[]")}, float(at)))
                for c, j, sub, end, u, st, res, values, gpu, at in rows)
            written += len(rows)
            if len(rows) < batch:
                return written
            start = int(rows[-1][3])

    def count(self, cluster: str) -> int:
        return int(self.db.query("SELECT count(*) FROM archive_jobs WHERE cluster = ?",
                                 (cluster,))[0][0])

    def prune(self, cluster: str, older_than_days: float) -> int:
        """Drop ``cluster``'s jobs that ended more than ``older_than_days`` ago (0: keep
        forever) from every table that holds a row per job (``PRUNED``); the number of
        reports dropped. Other clusters sharing the archive keep theirs: each cluster's
        sync prunes it by its own JOBREPORT_ARCHIVE_RETENTION_DAYS."""
        if older_than_days <= 0:
            return 0
        cutoff = int(self.clock() - older_than_days * 86400)
        counts = [self.db.execute(f"DELETE FROM {table} WHERE cluster = ?"  # noqa: S608
                                  " AND end_time < ?", (cluster, cutoff)) for table in PRUNED]
        return counts[0]

    # -- the sync's bookkeeping -------------------------------------------------
    def watermark(self, cluster: str, stream: str) -> int | None:
        rows = self.db.query("SELECT end_time FROM sync_watermarks WHERE cluster = ?"
                             " AND stream = ?", (cluster, stream))
        return int(rows[0][0]) if rows else None

    def origin(self, cluster: str, stream: str) -> int | None:
        """Where the stream began: the oldest end its first run looked at."""
        rows = self.db.query("SELECT origin FROM sync_watermarks WHERE cluster = ?"
                             " AND stream = ?", (cluster, stream))
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def advance(self, cluster: str, stream: str, end_time: int,
                origin: int | None = None) -> None:
        """Move the watermark to ``end_time``; never backwards. ``origin``: where the run
        began looking, kept from the stream's first watermark on."""
        self.db.execute(
            self.db.dialect.upsert_watermark,
            (cluster, stream, int(end_time), self.clock(),
             None if origin is None else int(origin)))

    def done(self, cluster: str, stream: str, since: int) -> set[tuple[str, int]]:
        """(job id, submit time) of the jobs this stream processed that ended since ``since``."""
        rows = self.db.query("SELECT job_id, submit_time FROM sync_log WHERE cluster = ?"
                             " AND stream = ? AND end_time >= ?", (cluster, stream, since))
        return {(r[0], int(r[1])) for r in rows}

    def log(self, cluster: str, stream: str, job_id: str, submit_time: int, end_time: int,
            outcome: str) -> bool:
        """Record a processed job; False when it was already recorded."""
        return self.db.execute(
            f"{self.db.dialect.insert_ignore} INTO sync_log (cluster, stream, job_id,"
            " submit_time, end_time, outcome, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (cluster, stream, job_id, submit_time, end_time, outcome, self.clock())) == 1

    def outcomes(self, cluster: str, stream: str) -> list[tuple[str, int, str]]:
        rows = self.db.query("SELECT job_id, submit_time, outcome FROM sync_log WHERE"
                             " cluster = ? AND stream = ? ORDER BY end_time, job_id",
                             (cluster, stream))
        return [(r[0], int(r[1]), r[2]) for r in rows]

    def failed(self, cluster: str, stream: str, job_id: str, submit_time: int, end_time: int,
               error: str) -> tuple[int, float]:
        """Count one more failed attempt at a job; (attempts so far, first failure's time)."""
        now = self.clock()
        key = (cluster, stream, job_id, submit_time)
        error = error[:ERROR_CHARS]
        with self.db.transaction():
            self.db.execute(
                f"{self.db.dialect.insert_ignore} INTO sync_failures (cluster, stream, job_id,"
                " submit_time, end_time, attempts, first_at, last_at, error)"
                " VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)", (*key, end_time, now, now, error))
            self.db.execute("UPDATE sync_failures SET attempts = attempts + 1, last_at = ?,"
                            " error = ? WHERE cluster = ? AND stream = ? AND job_id = ?"
                            " AND submit_time = ?", (now, error, *key))
            rows = self.db.query("SELECT attempts, first_at FROM sync_failures WHERE"
                                 " cluster = ? AND stream = ? AND job_id = ?"
                                 " AND submit_time = ?", key)
        return int(rows[0][0]), float(rows[0][1])

    def forget_failure(self, cluster: str, stream: str, job_id: str, submit_time: int) -> None:
        """The job is done with (processed, or given up on): no failures to count."""
        self.db.execute("DELETE FROM sync_failures WHERE cluster = ? AND stream = ?"
                        " AND job_id = ? AND submit_time = ?",
                        (cluster, stream, job_id, submit_time))

    def failures(self, cluster: str, stream: str) -> list[tuple[str, int, int, str]]:
        """Jobs still being retried: (job id, submit time, attempts, last error)."""
        rows = self.db.query("SELECT job_id, submit_time, attempts, error FROM sync_failures"
                             " WHERE cluster = ? AND stream = ? ORDER BY end_time, job_id",
                             (cluster, stream))
        return [(r[0], int(r[1]), int(r[2]), r[3]) for r in rows]

    @contextmanager
    def sync_lock(self, cluster: str) -> Iterator[None]:
        """One sync per cluster at a time (ArchiveBusy otherwise)."""
        with self.db.lock(f"sync-{cluster}"):
            yield


def _job(row: Iterable[Any]) -> ArchivedJob:
    (cluster, job_id, submit, end, user, state, resolution, summary, series, at) = row
    return ArchivedJob(cluster, job_id, int(submit), int(end), user, state,
                       float(resolution or 0), json.loads(summary), json.loads(series),
                       float(at))


# What a digest line reads of an archived summary (``webapp.archive.week_sums``), as paths.
DIGEST_FIELDS = ("elapsed_seconds", "cpus", "cpu_seconds", "gpus", "memory_requested_bytes",
                 "memory_peak_bytes", "nodes", "usage.energy_joules", "job_name", "account",
                 "findings")


def _digest_summary(values: list[Any]) -> dict[str, Any]:
    """The summary's ``DIGEST_FIELDS`` as the summary holds them (absent: not there)."""
    out: dict[str, Any] = {}
    for path, value in zip(DIGEST_FIELDS, values, strict=True):
        if value is None:
            continue
        *parents, leaf = path.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
