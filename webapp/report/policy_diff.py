"""A new policy tried on history (`jobreport policy diff`): each archived report of a
window judged under the policy in force and under the new one, read and judged as
`jobreport rejudge` does (report/rejudge.py), and the findings that would change. Nothing
is written."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from webapp.archive.store import Archive
from webapp.detectors.policy import Policy
from webapp.model import JobReport, Severity
from webapp.report.rejudge import archived_reports, judged
from webapp.sources.gpu_metrics import GpuMetrics
from webapp.thresholds import Thresholds

KINDS = ("added", "removed", "severity")


@dataclass(frozen=True)
class Change:
    """One finding of one job: ``added`` (only under the new policy), ``removed`` (only
    under the one in force) or ``severity`` (under both, at another severity)."""

    finding: str
    kind: str
    before: Severity | None
    after: Severity | None


@dataclass(frozen=True)
class JobChange:
    job_id: str
    user: str | None
    changes: tuple[Change, ...]


@dataclass
class PolicyDiff:
    jobs: int = 0  # archived reports judged under both
    changed: list[JobChange] = field(default_factory=list)
    # per finding and per user: how many of each kind of change
    by_rule: dict[str, Counter[str]] = field(default_factory=dict)
    by_user: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, change: JobChange) -> None:
        self.changed.append(change)
        user = self.by_user.setdefault(change.user or "-", Counter())
        user["jobs"] += 1
        for c in change.changes:
            self.by_rule.setdefault(c.finding, Counter())[c.kind] += 1
            user[c.kind] += 1


def changes(before: JobReport, after: JobReport) -> tuple[Change, ...]:
    """What of ``before``'s findings ``after`` adds, drops or makes another severity."""
    old = {f.name: f.severity for f in before.findings}
    new = {f.name: f.severity for f in after.findings}
    out = [Change(n, "added", None, new[n]) for n in new if n not in old]
    out += [Change(n, "removed", old[n], None) for n in old if n not in new]
    out += [Change(n, "severity", old[n], new[n]) for n in old
            if n in new and old[n] is not new[n]]
    return tuple(sorted(out, key=lambda c: (c.finding, KINDS.index(c.kind))))


def policy_diff(archive: Archive, cluster: str, since: int, until: int,
                thresholds: Thresholds, in_force: Policy, new: Policy, min_coverage: float,
                gpu: GpuMetrics, progress: str | None = None) -> PolicyDiff:
    """``cluster``'s reports that ended in [since, until] judged under ``in_force`` and
    under ``new`` with the same thresholds; the jobs whose findings differ."""
    diff = PolicyDiff()
    for job, report in archived_reports(archive, cluster, since, until, progress):
        diff.jobs += 1
        found = changes(judged(report, thresholds, in_force, min_coverage, gpu),
                        judged(report, thresholds, new, min_coverage, gpu))
        if found:
            diff.add(JobChange(job.job_id, job.user or report.user, found))
    return diff
