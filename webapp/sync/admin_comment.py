"""The sync's AdminComment step (JOBREPORT_ADMIN_COMMENT): an archived job's summary, in
jobstats' format, written into its Slurm ``AdminComment``, never over a comment already
there. A failure here is logged and never stops the sync: the archive and the emails do
not depend on it.

Slurm takes no update of an ended job through slurmctld (``scontrol update`` answers "Job
has already finished"), so the comment goes to the accounting database, one of two ways:

- ``sacctmgr``: ``sacctmgr -i modify job where jobid=N set AdminComment=...`` (what
  jobstats' epilog runs). Some releases' sacctmgr lowercase the value (22.05 does), which
  ruins base64; the writer reads the comment back, and when it is not what was written it
  clears it again and refuses further writes this run (say "database" instead).
- ``database``: one ``UPDATE`` of the job's row in ``<cluster>_job_table`` as a MariaDB
  user granted only SELECT and UPDATE on ``admin_comment`` there (jobstats' own ingest
  script writes the same column). The "only when empty" test is part of the statement.

Either way an existing comment (the site's, or jobstats' own ``JS1:``) is kept.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Callable
from typing import Any

from webapp.model import JobReport, SourceUnavailable
from webapp.report.jobstats_summary import build_jobstats_summary
from webapp.settings import Settings
from webapp.sources.accounting import connect_from_url
from webapp.sources.ended import EndedJob
from webapp.sources.jobstats_comment import encode_comment
from webapp.sources.sacct import run_sacct

log = logging.getLogger(__name__)

Runner = Callable[[list[str]], str]
CLUSTER_RE = re.compile(r"[A-Za-z0-9_]{1,64}\Z")

# Outcomes, as the sync logs and counts them.
WRITTEN = "written"
KEPT = "kept the comment already there"
MANGLED = "sacctmgr changed the text (lowercased?); cleared it again"
NOT_FOUND = "job not in the accounting database"


def run_command(argv: list[str], timeout: float = 30.0) -> str:
    """Run a Slurm client command (no shell); SourceUnavailable on any failure."""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable(argv[0], str(exc)) from None
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SourceUnavailable(argv[0], f"exit status {proc.returncode}: "
                                         f"{why[-1] if why else 'no message'}")
    return proc.stdout.decode("utf-8", "replace")


class SacctmgrCommentWriter:
    """AdminComment through ``sacctmgr``, checked by reading it back with ``sacct``."""

    name = "sacctmgr"

    def __init__(self, cluster: str, sacct: str = "sacct", sacctmgr: str = "sacctmgr",
                 timeout: float = 30.0, runner: Runner | None = None) -> None:
        self.cluster = cluster
        self.sacct, self.sacctmgr = sacct, sacctmgr
        self._run = runner or (lambda argv: _runner(argv, timeout))
        self.broken: str | None = None  # why writes stopped for this run

    def current(self, job_id: str) -> str | None:
        """The job's AdminComment now; None when sacct does not know the job."""
        out = self._run([self.sacct, "-n", "-P", "-X", "--allusers", "--clusters",
                         self.cluster, "--format", "JobID,AdminComment", "--jobs", job_id])
        for line in out.splitlines():
            jid, _, comment = line.partition("|")
            if jid == job_id:
                return comment
        return None

    def _set(self, job_id: str, text: str) -> None:
        # An array task by its array's id and index (``123_4``), as jobstats' epilog does:
        # a bare id equal to the array's would reach every task of the array.
        self._run([self.sacctmgr, "-i", "modify", "job", "where", f"jobid={job_id}",
                   f"cluster={self.cluster}", "set", f"AdminComment={text}"])

    def write(self, job_id: str, raw_id: str, submit_time: int, comment: str) -> str:
        """Write ``comment`` unless the job has one; the outcome, as one of this module's
        constants."""
        if self.broken:
            raise SourceUnavailable(self.name, self.broken)
        now = self.current(job_id)
        if now is None:
            return NOT_FOUND
        if now:
            return KEPT
        self._set(job_id, comment)
        if self.current(job_id) != comment:
            self._set(job_id, "")
            self.broken = ("this sacctmgr does not store AdminComment as given; set "
                           "JOBREPORT_ADMIN_COMMENT=database")
            return MANGLED
        return WRITTEN


def _runner(argv: list[str], timeout: float) -> str:
    # sacct through the sacct source's runner: same decoding, same error reporting.
    if argv[0].endswith("sacct"):
        return run_sacct(argv, timeout)
    return run_command(argv, timeout)


class DatabaseCommentWriter:
    """AdminComment by one conditional UPDATE of the job's row in slurmdbd's database."""

    name = "database"

    def __init__(self, db_url: str, cluster: str, connect: Callable[[], Any] | None = None,
                 ) -> None:
        if not CLUSTER_RE.match(cluster):
            raise ValueError(f"invalid cluster name {cluster!r}")
        self.table = f"{cluster}_job_table"  # an identifier: checked above, never bound
        self._connect = connect or (lambda: connect_from_url(db_url))

    def write(self, job_id: str, raw_id: str, submit_time: int, comment: str) -> str:
        """Write ``comment`` unless the row has one (``job_id`` is not needed: the row is
        found by its numeric id and submit time)."""
        import pymysql

        if not raw_id.isdigit():
            return NOT_FOUND  # the row's id_job is the job's own numeric id
        try:
            conn = self._connect()
        except pymysql.MySQLError as exc:
            raise SourceUnavailable(self.name, f"cannot connect: {exc.args[-1]}") from None
        try:
            with conn.cursor() as cur:
                # One statement: a comment written since we looked is never overwritten.
                changed = cur.execute(
                    f"UPDATE `{self.table}` SET admin_comment = %s"  # noqa: S608 (checked)
                    " WHERE id_job = %s AND time_submit = %s"
                    " AND (admin_comment IS NULL OR admin_comment = '')",
                    (comment, int(raw_id), submit_time))
                if changed:
                    conn.commit()
                    return WRITTEN
                cur.execute(f"SELECT id_job FROM `{self.table}`"  # noqa: S608 (checked)
                            " WHERE id_job = %s AND time_submit = %s LIMIT 1",
                            (int(raw_id), submit_time))
                found = cur.fetchone() is not None
            return KEPT if found else NOT_FOUND
        except pymysql.MySQLError as exc:
            raise SourceUnavailable(self.name, str(exc.args[-1])) from None
        finally:
            conn.close()


CommentWriter = SacctmgrCommentWriter | DatabaseCommentWriter


def comment_writer_from(settings: Settings) -> CommentWriter | None:
    """The writer JOBREPORT_ADMIN_COMMENT chose; None when it is off."""
    if settings.admin_comment == "sacctmgr":
        return SacctmgrCommentWriter(settings.cluster, settings.sacct, settings.sacctmgr,
                                     settings.sacct_timeout)
    if settings.admin_comment == "database":
        return DatabaseCommentWriter(settings.admin_comment_db_url, settings.cluster)
    return None


def write_summary(writer: CommentWriter, job: EndedJob, report: JobReport,
                  scrape_interval: float) -> str:
    """Write the report's summary into the job's AdminComment; the outcome in words."""
    if report.unfinished:
        return "not ended"
    summary = build_jobstats_summary(report, short_below=2 * scrape_interval)
    raw_id = report.metrics_id or job.job_id
    try:
        outcome = writer.write(job.job_id, raw_id, job.submit_time, encode_comment(summary))
    except SourceUnavailable as exc:
        outcome = f"failed: {exc}"
    level = logging.INFO if not outcome.startswith("failed") else logging.WARNING
    log.log(level, "job %s: AdminComment %s", job.job_id, outcome)
    return outcome
