"""History judged again (`jobreport rejudge`): the archived reports of a window re-run
through the detectors from their stored figures, under the policy and thresholds in
force, and written back in place, each naming the policy version it was judged by."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from webapp.archive.store import Archive
from webapp.detectors import judge
from webapp.detectors.policy import Policy
from webapp.json_codec import decode, encode
from webapp.report.coverage import audited
from webapp.sources.gpu_metrics import GpuMetrics
from webapp.thresholds import Thresholds


@dataclass(frozen=True)
class Rejudged:
    jobs: int  # archived reports read
    changed: int  # whose findings changed
    job_ids: tuple[str, ...]  # those


def rejudge(archive: Archive, cluster: str, since: int, until: int, thresholds: Thresholds,
            policy: Policy, min_coverage: float, gpu: GpuMetrics,
            dry_run: bool = False) -> Rejudged:
    """Judge ``cluster``'s reports that ended in [since, until] again; rewrite each whose
    findings or versions changed (none with ``dry_run``)."""
    seen, changed = 0, []
    for job in list(archive.jobs(cluster, since, until)):
        seen += 1
        report = decode(job.summary, job.series)
        findings, resolved = judge(report, thresholds, policy)
        judged = audited(dataclasses.replace(report, findings=findings), resolved.thresholds,
                         min_coverage, gpu, policy_version=policy.version)
        summary = encode(judged, include_series=False)
        if summary["findings"] != job.summary.get("findings"):
            changed.append(job.job_id)
        if summary != job.summary and not dry_run:
            archive.replace(dataclasses.replace(job, summary=summary))
    return Rejudged(seen, len(changed), tuple(changed))
