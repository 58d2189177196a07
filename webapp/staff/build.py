"""The staff report assembled: the per-user tables (what was requested and not used,
repeat offenders) and every table of ``staff.tables`` over one window's jobs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from webapp.staff.data import StaffJob
from webapp.staff.tables import (
    HOUR,
    Row,
    StaffReport,
    Table,
    energy_by,
    fragmentation,
    held,
    idle_nodes,
    large_memory,
    longest_queued,
    mig_fit,
    smaller_gpu,
    user_efficiency,
)
from webapp.thresholds import StaffConfig, Thresholds
from webapp.unused import unused
from webapp.watch_records import AlertRecord, ordinal


def _per_user(key: str, title: str, why: str, columns: tuple[str, ...],
              totals: Mapping[str, tuple[float, float]], unit: str, cfg: StaffConfig) -> Table:
    """Rows of (user, unused, requested, share unused), most unused first."""
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))
    rows = [Row((u, f"{unused:,.2f}", f"{asked:,.2f}", f"{unused / asked:.0%}" if asked else ""),
                {"user": u, f"{unit}_unused": unused, f"{unit}_requested": asked}, user=u)
            for u, (unused, asked) in ranked if unused > 0]
    return Table(key, title, why, ("user", *columns), tuple(rows[: int(cfg.rows)]))


def memory_totals(jobs: list[StaffJob]) -> dict[str, tuple[float, float]]:
    """Per user: (GiB-hours unused, GiB-hours requested), ``webapp.unused``'s figures."""
    totals: dict[str, tuple[float, float]] = {}
    for j in jobs:
        amount = unused(held(j)).get("memory")
        if amount is None or amount.unused is None:
            continue
        u, a = totals.get(j.user, (0.0, 0.0))
        totals[j.user] = (u + amount.unused, a + amount.requested)
    return totals


def memory_unused(jobs: list[StaffJob], cfg: StaffConfig) -> Table:
    return memory_table(memory_totals(jobs), cfg)


def memory_table(totals: Mapping[str, tuple[float, float]], cfg: StaffConfig) -> Table:
    return _per_user("memory_unused", "Over-requested memory",
                     "Requested minus the peak, node by node where each node's own peak is "
                     "known (else the busiest node's times the nodes), times the run time: "
                     "the report's own figure.",
                     ("GiB-hours unused", "GiB-hours requested", "unused"), totals, "gib_hours",
                     cfg)


def time_totals(jobs: list[StaffJob]) -> dict[str, tuple[float, float]]:
    """Per user: (core-hours of time limit unused, core-hours of time limit)."""
    totals: dict[str, tuple[float, float]] = {}
    for j in jobs:
        if j.time_limit is None:
            continue
        unused = max(0.0, j.time_limit - j.elapsed) * j.cpus / HOUR
        u, a = totals.get(j.user, (0.0, 0.0))
        totals[j.user] = (u + unused, a + j.time_limit * j.cpus / HOUR)
    return totals


def time_unused(jobs: list[StaffJob], cfg: StaffConfig) -> Table:
    return time_table(time_totals(jobs), cfg)


def time_table(totals: Mapping[str, tuple[float, float]], cfg: StaffConfig) -> Table:
    return _per_user("time_unused", "Over-requested time",
                     "Time limit minus run time, times the cores held: core-hours the scheduler "
                     "had to keep free and did not need.",
                     ("core-hours unused", "core-hours requested", "unused"), totals,
                     "core_hours", cfg)


def offenders(alerts: Mapping[str, list[AlertRecord]], cfg: StaffConfig) -> Table:
    rows = []
    for user, records in sorted(alerts.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rules = Counter(a.rule for a in records)
        last = records[-1]
        rows.append(Row(
            (user, f"{ordinal(len(records))} notice in {cfg.notice_days:.0f} days",
             ", ".join(f"{r} x{n}" for r, n in rules.most_common()), last.job_id),
            {"user": user, "notices": len(records), "rules": ",".join(sorted(rules)),
             "last_job": last.job_id, "last_at": last.created_at}, user=user))
    return Table("repeat_offenders", "Repeat offenders",
                 f"Alerts `jobreport watch` sent per user in the last {cfg.notice_days:.0f} days.",
                 ("user", "notices", "rules", "last job"), tuple(rows[: int(cfg.rows)]))


def build_staff_report(cluster: str, jobs: list[StaffJob], since: float, until: float,
                       cfg: StaffConfig, thresholds: Thresholds,
                       alerts: Mapping[str, list[AlertRecord]]) -> StaffReport:
    """Every table over the jobs that ended in [since, until]."""
    if cfg.partitions:
        jobs = [j for j in jobs if j.partition in cfg.partitions]
    long_enough = [j for j in jobs if j.elapsed >= thresholds.min_runtime_hours * HOUR]
    notices = {u: len(a) for u, a in alerts.items()}
    tables = (
        user_efficiency(jobs, cfg, thresholds, notices),
        smaller_gpu(long_enough, cfg, thresholds),
        mig_fit(long_enough, thresholds),
        fragmentation(long_enough, cfg),
        idle_nodes(long_enough, cfg, thresholds),
        memory_unused(jobs, cfg),
        time_unused(jobs, cfg),
        large_memory(long_enough, cfg, thresholds),
        longest_queued(jobs, cfg),
        offenders(alerts, cfg),
        energy_by("account", jobs, cfg),
        energy_by("user", jobs, cfg),
    )
    return StaffReport(cluster, since, until, len(jobs), cfg, thresholds, tables)

