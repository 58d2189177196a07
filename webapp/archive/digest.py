"""What a user's archived week adds up to: the weekly digest's content, from the archive.

Per job, what was requested and not used:
- CPU-hours: CPUs x elapsed - CPU time (sacct's TotalCPU), never below zero;
- GPU-hours: GPUs x elapsed x (1 - mean GPU utilization over the archived series), for
  jobs with GPUs whose utilization was recorded;
- memory GB-hours: (requested - peak) x elapsed, in 10^9 bytes x hours.
Energy, per job and per account: the kWh the exporter split to the job (the archived
``usage.energy_joules``); jobs on nodes without an energy source add nothing.
A figure that cannot be computed (no CPU time, no peak) counts as nothing, never a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webapp.archive.store import ArchivedJob

GB = 1e9


@dataclass(frozen=True)
class JobWaste:
    job_id: str
    job_name: str | None
    state: str | None
    end_time: int
    elapsed_seconds: float | None
    cpu_hours: float
    gpu_hours: float
    memory_gb_hours: float
    findings: tuple[str, ...]
    folded: bool  # the daily cap kept it out of email: its findings are told here
    account: str | None = None
    energy_kwh: float | None = None  # None: no energy series


@dataclass(frozen=True)
class Digest:
    cluster: str
    user: str
    since: int
    until: int
    jobs: tuple[JobWaste, ...]
    top_finding: str | None = None
    top_count: int = 0
    top_message: str | None = None
    top_advice: str | None = None

    @property
    def cpu_hours(self) -> float:
        return sum(j.cpu_hours for j in self.jobs)

    @property
    def gpu_hours(self) -> float:
        return sum(j.gpu_hours for j in self.jobs)

    @property
    def memory_gb_hours(self) -> float:
        return sum(j.memory_gb_hours for j in self.jobs)

    @property
    def energy_kwh(self) -> float | None:
        values = [j.energy_kwh for j in self.jobs if j.energy_kwh is not None]
        return sum(values) if values else None

    @property
    def energy_by_account(self) -> list[tuple[str, float]]:
        """(account, kWh), largest first."""
        kwh: Counter[str] = Counter()
        for j in self.jobs:
            if j.energy_kwh is not None:
                kwh[j.account or "?"] += j.energy_kwh
        return sorted(kwh.items(), key=lambda kv: (-kv[1], kv[0]))

    @property
    def folded(self) -> int:
        return sum(j.folded for j in self.jobs)


def _mean_utilization(series: Mapping[str, Any]) -> float | None:
    values = [v for s in series.get("gpu_utilization", []) for _, v in s["points"]]
    return sum(values) / len(values) if values else None


def job_waste(job: ArchivedJob, folded: bool = False) -> JobWaste:
    s = job.summary
    elapsed = s.get("elapsed_seconds")
    hours = (elapsed or 0.0) / 3600
    cpu = 0.0
    if s.get("cpus") and s.get("cpu_seconds") is not None and elapsed:
        cpu = max(0.0, s["cpus"] * elapsed - s["cpu_seconds"]) / 3600
    gpu = 0.0
    util = _mean_utilization(job.series)
    if s.get("gpus") and util is not None:
        gpu = s["gpus"] * hours * max(0.0, 1.0 - util)
    mem = 0.0
    if s.get("memory_requested_bytes") and s.get("memory_peak_bytes") is not None:
        mem = max(0, s["memory_requested_bytes"] - s["memory_peak_bytes"]) / GB * hours
    joules = (s.get("usage") or {}).get("energy_joules")
    return JobWaste(job.job_id, s.get("job_name"), job.state, job.end_time, elapsed, cpu, gpu,
                    mem, tuple(f["name"] for f in s.get("findings", [])), folded,
                    s.get("account"), None if joules is None else joules / 3.6e6)


def build_digest(cluster: str, user: str, since: int, until: int, jobs: Iterable[ArchivedJob],
                 folded: set[tuple[str, int]] = frozenset()) -> Digest:  # type: ignore[assignment]
    """The digest of ``user``'s archived jobs that ended in [since, until)."""
    jobs = [j for j in jobs if since <= j.end_time < until]
    counts: Counter[str] = Counter(f["name"] for j in jobs for f in j.summary.get("findings", []))
    top = message = advice = None
    n = 0
    if counts:
        # Most common; a tie goes to the name first in alphabetical order (stable output).
        top, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        latest = max((j for j in jobs if any(f["name"] == top for f in j.summary["findings"])),
                     key=lambda j: j.end_time)
        found = next(f for f in latest.summary["findings"] if f["name"] == top)
        message, advice = found["message"], found["advice"]
    return Digest(cluster, user, since, until,
                  tuple(job_waste(j, (j.job_id, j.submit_time) in folded) for j in jobs),
                  top, n, message, advice)
