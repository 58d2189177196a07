"""One account's period, per member, from the archive's per-job rows: the account report's
figures.

Each figure is a column of ``staff_rows.JOBS`` (the staff report's per-job formulas, the
one computation of waste), summed over the jobs that ran in the period. A job that
straddles an edge of the period counts only its share inside it, as ``sacct -T``
truncates it: its run clipped to [since, until] over its whole run, times each of its
figures (``SHARE``), so the allocated CPU time is sacct's CPUTimeRAW of the window.
The findings that cost the most come from the digest's rows (``archive_digest_jobs``,
the one place a job's finding names are stored beside what it left unused).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webapp.archive.db import Database
from webapp.archive.digest_rows import SEPARATOR
from webapp.archive.staff_rows import JOBS

# The part of a job's run inside [since, until] (two parameters each: since, until):
# the run clipped to the period, over the run; 1 for a job without a run time.
_START = "CASE WHEN start_time > ? THEN start_time ELSE ? END"
_END = "CASE WHEN end_at < ? THEN end_at ELSE ? END"
SHARE = (f"CASE WHEN elapsed > 0 AND start_time IS NOT NULL AND end_at IS NOT NULL THEN"
         f" (CASE WHEN ({_END}) > ({_START}) THEN (({_END}) - ({_START})) / elapsed"
         " ELSE 0 END) ELSE 1 END")
# per member: name -> the sum over the member's jobs (each figure times the job's share)
MEMBER_SUMS = {
    # jobs that ran in the period (not those cancelled before they started)
    "jobs": "COUNT(CASE WHEN elapsed > 0 AND s > 0 THEN 1 END)",
    # CPU time allocated (AllocCPUS x elapsed: sacct's CPUTimeRAW, what sreport counts)
    "cpu_hours": "SUM(elapsed * cpus * s) / 3600.0",
    "cpu_hours_used": "SUM(cpu_seconds * s) / 3600.0",  # TotalCPU
    "cpu_hours_idle": "SUM(cpu_waste * s)",
    "gpu_hours": "SUM(gpu_seconds * s) / 3600.0",
    "gpu_hours_idle": "SUM(gpu_waste * s)",
    "memory_gib_hours_asked": "SUM(mem_asked * s)",
    "memory_gib_hours_idle": "SUM(mem_waste * s)",
    "energy_joules": "SUM(energy_joules * s)",
}


def _share_params(since: float, until: float) -> list[float]:
    """The parameters of ``SHARE``, in the order its placeholders appear."""
    end, start = [until, until], [since, since]
    return [*end, *start, *end, *start]


class AccountSums:
    """An account's per-member sums and costly findings over an open archive database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def members(self, cluster: str, account: str, since: float,
                until: float) -> list[dict[str, Any]]:
        """One dict per member with jobs that ran in [since, until] (``MEMBER_SUMS`` and
        ``user``), by user name; sums over no known figure are 0."""
        sums = ", ".join(MEMBER_SUMS.values())
        rows = self.db.query(
            f"SELECT user_name, {sums} FROM (SELECT *, {SHARE} AS s FROM {JOBS}"  # noqa: S608
            " WHERE cluster = ? AND account = ? AND end_time >= ? AND"
            " (start_time IS NULL OR start_time < ?)) AS shared GROUP BY user_name"
            " ORDER BY user_name",
            [*_share_params(since, until), cluster, account, int(since), until])
        # MariaDB sums DOUBLE x DECIMAL as DECIMAL: floats here, as SQLite gives them.
        return [{"user": user, **{k: float(v or 0) for k, v in
                                  zip(MEMBER_SUMS, values, strict=True)}}
                for user, *values in rows]

    def job_ids(self, cluster: str, job_ids: Sequence[str]) -> set[str]:
        """The ids among ``job_ids`` the archive has a row of."""
        return {r[0] for r in self.db.query_in(
            "SELECT job_id FROM archive_staff_jobs WHERE cluster = ? AND job_id IN ({})",
            [cluster], list(dict.fromkeys(job_ids)))}

    def findings(self, cluster: str, account: str, since: float,
                 until: float) -> list[dict[str, Any]]:
        """Per finding of the account's jobs that ended in [since, until]: the jobs it was
        found in and what they left unused (the digest's per-job figures), most CPU-hours
        idle first, then GPU-hours idle, then name."""
        rows = self.db.query(
            "SELECT findings, cpu_hours, gpu_hours, memory_gib_hours FROM"
            " archive_digest_jobs WHERE cluster = ? AND account = ? AND end_time >= ? AND"
            " end_time <= ? AND findings IS NOT NULL AND findings <> ''",
            [cluster, account, int(since), int(until)])
        out: dict[str, dict[str, Any]] = {}
        for names, cpu, gpu, memory in rows:
            for name in names.split(SEPARATOR):
                f = out.setdefault(name, {"finding": name, "jobs": 0, "cpu_hours_idle": 0.0,
                                          "gpu_hours_idle": 0.0,
                                          "memory_gib_hours_idle": 0.0})
                f["jobs"] += 1
                f["cpu_hours_idle"] += float(cpu or 0)
                f["gpu_hours_idle"] += float(gpu or 0)
                f["memory_gib_hours_idle"] += float(memory or 0)
        return sorted(out.values(), key=lambda f: (-f["cpu_hours_idle"],
                                                   -f["gpu_hours_idle"], f["finding"]))
