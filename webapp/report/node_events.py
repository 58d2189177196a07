"""The job's nodes down or drained during its run: slurmdbd's node events, read once per
report (``JobReport.node_events``) for the hardware-fault finding.

An event counts when it began between the job's start and a few minutes after its end:
Slurm drains a node whose processes would not die as the job ends ("Kill task failed")
and a site's health check runs in the epilog, so their verdicts come just after.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta

from webapp.model import JobReport, SourceUnavailable
from webapp.sources.protocols import NodeEventReader

log = logging.getLogger(__name__)

AFTER_END = timedelta(minutes=5)


def with_node_events(report: JobReport, accounting: object) -> JobReport:
    """``report`` with its nodes' events; as is without a source of them (sacct alone),
    a start or nodes, or when the database cannot say (the rest of the report stands)."""
    if not isinstance(accounting, NodeEventReader) or report.start_time is None:
        return report
    if not report.nodes:
        return report
    end = (report.end_time or datetime.now(UTC)) + AFTER_END
    try:
        events = accounting.node_events(report.nodes, report.start_time, end)
    except SourceUnavailable as exc:
        log.info("job %s: no node events: %s (%s)", report.job_id, exc.reason, exc.detail)
        return report
    return dataclasses.replace(report, node_events=events) if events else report
