"""History judged again (`jobreport rejudge`): the archived reports of a window re-run
through the detectors from their stored figures, under the policy and thresholds in
force, and written back in place, each naming the policy version it was judged by.
`jobreport policy diff` reads the window the same way (``archived_reports``) and judges
each report as here (``judged``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from tqdm import tqdm

from webapp.archive.record import ArchivedJob
from webapp.archive.store import Archive
from webapp.detectors import judge
from webapp.detectors.policy import Policy
from webapp.json_codec import decode, encode
from webapp.model import JobReport
from webapp.report.coverage import audited
from webapp.sources.gpu_metrics import GpuMetrics
from webapp.thresholds import Thresholds


@dataclass(frozen=True)
class Rejudged:
    jobs: int  # archived reports read
    changed: int  # whose findings changed
    job_ids: tuple[str, ...]  # those


def archived_reports(archive: Archive, cluster: str, since: int, until: int,
                     progress: str | None = None) -> Iterator[tuple[ArchivedJob, JobReport]]:
    """``cluster``'s archived jobs that ended in [since, until], oldest first, each with its
    report decoded from the stored figures. The rows are read whole first, so a caller may
    write them back meanwhile. ``progress``: a progress bar of that name on a terminal."""
    jobs = list(archive.jobs(cluster, since, until))
    for job in tqdm(jobs, unit="job", desc=progress, disable=None if progress else True):
        yield job, decode(job.summary, job.series)


def judged(report: JobReport, thresholds: Thresholds, policy: Policy, min_coverage: float,
           gpu: GpuMetrics) -> JobReport:
    """``report`` with its findings under ``policy`` and its audit section (the withheld
    verdicts dropped), as the sync would have judged it."""
    findings, resolved = judge(report, thresholds, policy)
    return audited(dataclasses.replace(report, findings=findings), resolved.thresholds,
                   min_coverage, gpu, policy_version=policy.version,
                   site_thresholds=thresholds)


def rejudge(archive: Archive, cluster: str, since: int, until: int, thresholds: Thresholds,
            policy: Policy, min_coverage: float, gpu: GpuMetrics,
            dry_run: bool = False, progress: str | None = None) -> Rejudged:
    """Judge ``cluster``'s reports that ended in [since, until] again; rewrite each whose
    findings or versions changed (none with ``dry_run``)."""
    seen, changed = 0, []
    for job, report in archived_reports(archive, cluster, since, until, progress):
        seen += 1
        summary = encode(judged(report, thresholds, policy, min_coverage, gpu),
                         include_series=False)
        if summary["findings"] != job.summary.get("findings"):
            changed.append(job.job_id)
        if summary != job.summary and not dry_run:
            archive.replace(dataclasses.replace(job, summary=summary))
    return Rejudged(seen, len(changed), tuple(changed))
