"""What a user's archived week adds up to: the weekly digest's content, from the archive.

Per job, what was requested and not used: CPU core-hours, GPU-hours and memory GiB-hours,
by the report's own computation (``webapp.unused``) on the archived report's figures, so
a job's line in the digest says what its page says. A figure that cannot be computed (no
CPU time, no peak, no GPU samples) counts as nothing, never a guess.
Energy, per job and per account: the kWh the exporter split to the job (the archived
``usage.energy_joules``); jobs on nodes without an energy source add nothing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from webapp.archive.record import ArchivedJob
from webapp.formatting import JOULES_PER_KWH
from webapp.model import NodeMemory, memory_by_node
from webapp.unused import Held, gpus_busy, unused


@dataclass(frozen=True, slots=True)  # one per job of the week: no dict each
class JobWaste:
    job_id: str
    job_name: str | None
    state: str | None
    end_time: int
    elapsed_seconds: float | None
    cpu_hours: float
    gpu_hours: float
    memory_gib_hours: float  # GiB-hours (2**30 bytes)
    findings: tuple[str, ...]
    folded: bool  # the daily cap kept it out of email: its findings are told here
    account: str | None = None
    energy_kwh: float | None = None  # None: no energy series
    submit_time: int = 0  # with job_id, the archive's key of the job


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
    def memory_gib_hours(self) -> float:
        return sum(j.memory_gib_hours for j in self.jobs)

    @property
    def energy_kwh(self) -> float | None:
        values = [j.energy_kwh for j in self.jobs if j.energy_kwh is not None]
        return sum(values) if values else None

    @property
    def energy_by_account(self) -> list[tuple[str, float]]:
        """(account, kWh), largest first."""
        kwh: defaultdict[str, float] = defaultdict(float)
        for j in self.jobs:
            if j.energy_kwh is not None:
                kwh[j.account or "?"] += j.energy_kwh
        return sorted(kwh.items(), key=lambda kv: (-kv[1], kv[0]))

    @property
    def folded(self) -> int:
        return sum(j.folded for j in self.jobs)


def _gpus_busy(series: Mapping[str, Any]) -> float | None:
    """Each archived GPU series' mean, summed (as the report sums its GPUs')."""
    return gpus_busy(sum(v for _, v in s["points"]) / len(s["points"]) if s["points"] else None
                     for s in series.get("gpu_utilization", []))


def _memory_by_node(summary: Mapping[str, Any]) -> tuple[tuple[int, int | None], ...]:
    """Each node's own (request, peak) from the archived report's ``memory_nodes`` (the
    report's own figure: a het job's components judged each against its request)."""
    try:
        return memory_by_node(NodeMemory(**n) for n in summary.get("memory_nodes") or ())
    except TypeError:  # a summary from before a field was added or removed
        return ()


def job_waste(job: ArchivedJob, folded: bool = False) -> JobWaste:
    s = job.summary
    elapsed = s.get("elapsed_seconds")
    amounts = unused(Held(elapsed, s.get("cpus"), s.get("cpu_seconds"), s.get("gpus") or 0,
                          _gpus_busy(job.series), s.get("memory_requested_bytes"),
                          s.get("memory_peak_bytes"), len(s.get("nodes") or ()),
                          _memory_by_node(s)))

    def left(resource: str) -> float:
        amount = amounts.get(resource)
        return (amount.unused or 0.0) if amount else 0.0

    joules = (s.get("usage") or {}).get("energy_joules")
    return JobWaste(job.job_id, s.get("job_name"), job.state, job.end_time, elapsed,
                    left("cpu"), left("gpu"), left("memory"),
                    tuple(f["name"] for f in s.get("findings", [])), folded,
                    s.get("account"), None if joules is None else joules / JOULES_PER_KWH,
                    job.submit_time)


def top_finding(jobs: Sequence[JobWaste]) -> tuple[str, int, JobWaste] | None:
    """The most common finding of ``jobs`` (a tie goes to the name first in alphabetical
    order: stable output), how many times it was found, and the latest job it was found
    in (whose message and advice the digest quotes); None without findings."""
    counts: Counter[str] = Counter(name for j in jobs for name in j.findings)
    if not counts:
        return None
    top, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return top, n, max((j for j in jobs if top in j.findings), key=lambda j: j.end_time)


def quoted(findings: Iterable[Mapping[str, Any]], name: str) -> tuple[str | None, str | None]:
    """(message, advice) of the first finding called ``name`` of an archived summary's."""
    found = next((f for f in findings if f["name"] == name), None)
    return (found["message"], found["advice"]) if found is not None else (None, None)


def build_digest(cluster: str, user: str, since: int, until: int, jobs: Iterable[ArchivedJob],
                 folded: AbstractSet[tuple[str, int]] = frozenset()) -> Digest:
    """The digest of ``user``'s archived jobs that ended in [since, until), from their
    whole records (the weekly run reads each job's stored line: ``digest_rows``)."""
    jobs = [j for j in jobs if since <= j.end_time < until]
    lines = tuple(job_waste(j, (j.job_id, j.submit_time) in folded) for j in jobs)
    top = top_finding(lines)
    if top is None:
        return Digest(cluster, user, since, until, lines)
    name, n, latest = top
    record = next(j for j, line in zip(jobs, lines, strict=True) if line is latest)
    return Digest(cluster, user, since, until, lines, name, n,
                  *quoted(record.summary["findings"], name))
