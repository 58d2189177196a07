"""The job's queue context: its wait from the cluster series, compared with the accounting
view (its requested GPU types, the partition's usual time limit). A failing source costs
its part of the context and leaves a named gap, never the report."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from webapp.model import Gap, JobId, JobReport, QueueContext, SourceUnavailable
from webapp.sources.protocols import ClusterReader, QueueHistoryReader

USUAL_WINDOW = timedelta(days=30)  # "the partition's usual": its jobs of the last 30 days
NOTE_AFTER = 600.0  # seconds: JOBREPORT_QUEUE_NOTE_SECONDS' default


def weighted_median(counts: dict[float, int]) -> float | None:
    """The median of values given as value -> count (lower median on a tie)."""
    total = sum(counts.values())
    if total <= 0:
        return None
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if 2 * seen >= total:
            return value
    return None


def with_queue(report: JobReport, cluster: ClusterReader | None,
               history: QueueHistoryReader | None, now: datetime | None = None,
               note_after: float = NOTE_AFTER) -> JobReport:
    """``report`` with ``queue`` filled in (and gaps for what could not be read). A wait
    longer than ``note_after`` seconds is a ``long_wait``; only then is a scheduler state
    that was not recorded worth a note: a one-second wait needs no explanation."""
    if cluster is None or report.submit_time is None:
        return report
    gaps = list(report.gaps)
    try:
        queue = cluster.queue(report.job_id, report.partition, report.submit_time,
                              report.start_time)
    except SourceUnavailable as exc:
        gaps.append(Gap("cluster", f"queue context unavailable ({exc.reason})"))
        return dataclasses.replace(report, gaps=tuple(gaps))
    long_wait = queue.pending_seconds is not None and queue.pending_seconds > note_after
    queue = dataclasses.replace(queue, long_wait=long_wait)
    if not queue.seen and long_wait:
        gaps.append(Gap("cluster", "the scheduler's state was not recorded while the job "
                                   "waited, so why it waited is not known"))
    if history is not None:
        queue = _with_history(report, queue, history, gaps, now or datetime.now(UTC))
    return dataclasses.replace(report, queue=queue, gaps=tuple(gaps))


def _with_history(report: JobReport, queue: QueueContext, history: QueueHistoryReader,
                  gaps: list[Gap], now: datetime) -> QueueContext:
    try:
        # A pending job holds no GPU yet (its allocation is empty): its request still names
        # the type it waits for.
        asks = report.gpus or report.start_time is None
        types = history.requested_gpu_types(JobId.parse(report.job_id)) if asks else ()
        limits = history.time_limits(report.partition, now - USUAL_WINDOW) \
            if report.partition else {}
    except (SourceUnavailable, LookupError) as exc:
        gaps.append(Gap("accounting", f"queue history unavailable ({exc})"))
        return queue
    return dataclasses.replace(
        queue, requested_gpu_types=types,
        usual_time_limit_seconds=weighted_median(limits),
        usual_time_limit_jobs=sum(limits.values()),
    )
