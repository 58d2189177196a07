"""The sync's AdminComment step: an archived job's summary, in jobstats' format, into
Slurm's accounting (JOBREPORT_ADMIN_COMMENT). A failure here is logged and never stops
the sync: the archive and the emails do not depend on it."""

from __future__ import annotations

import logging

from webapp.model import JobReport, SourceUnavailable
from webapp.report.jobstats_summary import build_jobstats_summary
from webapp.sources.admin_comment import CommentWriter
from webapp.sources.ended import EndedJob
from webapp.sources.jobstats_comment import encode_comment

log = logging.getLogger(__name__)


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
