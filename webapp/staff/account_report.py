"""The account report for PIs and account coordinators: per member of one account, over a
period, what they were allocated and used, what they left idle, their energy and CO2e; the
findings that cost the most; the totals; and the change since the previous period of the
same length.

Figures come from the archive's per-job rows (``webapp.archive.account_sums``). A job
the archive lacks (not synced yet, still running) is taken from the accounting view for
what it alone knows: its allocated CPU and GPU time in the period (AllocCPUS and GPUs x
its run clipped to the period, sacct's ``-T``); such jobs are counted (``from_accounting``)
and their members marked, their other figures unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from webapp.archive.account_sums import MEMBER_SUMS, AccountSums
from webapp.formatting import JOULES_PER_KWH
from webapp.model import AccountingJob, JobReport
from webapp.report.energy import intensity_for

Recent = Callable[[datetime, str], Sequence[AccountingJob]]  # (since, account) -> jobs
FIGURES = tuple(k for k in MEMBER_SUMS if k != "energy_joules") + ("energy_kwh", "co2e_kg")
TOP_FINDINGS = 5


@dataclass
class Member:
    user: str
    figures: dict[str, float]
    from_accounting: int = 0  # jobs of the archive lacks, taken from the accounting view


@dataclass
class AccountReport:
    cluster: str
    account: str
    since: int
    until: int
    members: list[Member]
    totals: dict[str, float]
    findings: list[dict[str, Any]]
    previous: dict[str, float]  # the previous period's totals, same length
    from_accounting: int = 0
    intensity_source: str = ""
    coordinators: tuple[str, ...] = field(default=())

    @property
    def change(self) -> dict[str, float]:
        return {k: self.totals[k] - self.previous.get(k, 0.0) for k in self.totals}


def _add_accounting(members: dict[str, dict[str, float]], counts: dict[str, int],
                    jobs: Sequence[AccountingJob], archived: set[str], since: int,
                    until: int) -> None:
    """The jobs the archive lacks, added to their members' allocated CPU and GPU time."""
    for j in jobs:
        if j.job_id in archived or j.start_time is None or not j.cpus:
            continue
        start = max(j.start_time.timestamp(), since)
        end = min(j.end_time.timestamp() if j.end_time else until, until)
        if end <= start:
            continue
        user = j.user or str(j.uid)
        m = members.setdefault(user, dict.fromkeys(MEMBER_SUMS, 0.0))
        m["jobs"] += 1
        m["cpu_hours"] += (end - start) * j.cpus / 3600.0
        m["gpu_hours"] += (end - start) * j.gpus / 3600.0
        counts[user] = counts.get(user, 0) + 1


def _finish(figures: dict[str, float], grams_per_kwh: float | None) -> dict[str, float]:
    """The sums as the report shows them: kWh for joules, CO2e at the site's intensity."""
    out = {k: v for k, v in figures.items() if k != "energy_joules"}
    out["energy_kwh"] = figures["energy_joules"] / JOULES_PER_KWH
    out["co2e_kg"] = (out["energy_kwh"] * grams_per_kwh / 1000.0
                      if grams_per_kwh is not None else 0.0)
    return out


def _period(sums: AccountSums, cluster: str, account: str, since: int, until: int,
            recent: Recent | None, grams: float | None) -> tuple[list[Member], int]:
    got = {m.pop("user"): m for m in sums.members(cluster, account, since, until)}
    counts: dict[str, int] = {}
    if recent is not None:
        jobs = [j for j in recent(datetime.fromtimestamp(since, UTC), account)
                if j.start_time is not None and j.start_time.timestamp() < until]
        _add_accounting(got, counts, jobs, sums.job_ids(cluster, [j.job_id for j in jobs]),
                        since, until)
    members = [Member(u, _finish(f, grams), counts.get(u, 0)) for u, f in sorted(got.items())]
    return members, sum(counts.values())


def _totals(members: Sequence[Member]) -> dict[str, float]:
    return {k: sum(m.figures[k] for m in members) for k in FIGURES}


def build_account_report(sums: AccountSums, cluster: str, account: str, since: int,
                         until: int, recent: Recent | None = None,
                         carbon_intensity: str = "", carbon_country: str = "",
                         coordinators: tuple[str, ...] = ()) -> AccountReport:
    """``account``'s report over [since, until]; ``recent`` (the accounting view's job
    list of an account since a time) fills in the jobs the archive lacks."""
    # CO2e at the site's constant or its country's average; a per-run series (promql:)
    # has no one value for a month: CO2e then shows as 0 and the source says why.
    intensity = intensity_for(carbon_intensity, JobReport(job_id="account", cluster=cluster),
                              None, carbon_country)
    grams = intensity.grams_per_kwh if intensity else None
    members, missing = _period(sums, cluster, account, since, until, recent, grams)
    before, _ = _period(sums, cluster, account, 2 * since - until, since, recent, grams)
    return AccountReport(cluster, account, since, until, members, _totals(members),
                         sums.findings(cluster, account, since, until)[:TOP_FINDINGS],
                         _totals(before), missing,
                         intensity.source if intensity else "no carbon intensity set",
                         coordinators)
