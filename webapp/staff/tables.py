"""The staff report: who wasted what over a window, as ranked tables (pure).

Every table is computed from ``StaffJob``s (sacct + Prometheus, ``staff.data``)
and the alert record; each row keeps its raw ``values`` (JSON, tests) besides the
formatted cells, and names the job or user it links to.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from jobreport_common.units import GIB
from webapp import unused
from webapp.detectors.gpu_models import card_profiles, smallest_slice
from webapp.formatting import JOULES_PER_KWH, format_bytes, format_duration, format_percent
from webapp.model import memory_by_node, memory_judged
from webapp.report.peak import sacct_peak
from webapp.staff.data import StaffJob
from webapp.thresholds import StaffConfig, Thresholds

HOUR = 3600.0
# A job's row of a table (its cells, its values), or None: the job is not in the table.
Cell = tuple[tuple[str, ...], dict[str, float | str | None]] | None


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]
    values: Mapping[str, float | str | None]
    job: str | None = None  # the row links to this job's page ...
    user: str | None = None  # ... or to this user's


@dataclass(frozen=True)
class Table:
    key: str
    title: str
    why: str
    columns: tuple[str, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class StaffReport:
    cluster: str
    since: float
    until: float
    jobs: int
    config: StaffConfig
    thresholds: Thresholds
    tables: tuple[Table, ...]
    # Where the jobs came from: "sacct" (and Prometheus), or "archive" (the rows the sync
    # wrote, summed by the database), then the jobs archived up to ``archived_until``.
    source: str = "sacct"
    archived_until: float | None = None


def memory_peak(j: StaffJob) -> int | None:
    """The report's peak of the job's busiest node (sacct's side of ``webapp.report.peak``:
    MaxRSS x tasks per node; None where the report has none, as for a MaxRSS of 0), else,
    for a job without its sacct record (an archived row), the peak stored with it."""
    if j.sacct is None:
        return j.max_rss
    peak = sacct_peak(j.sacct)
    return peak.bytes if peak is not None else None


def held(j: StaffJob) -> unused.Held:
    """What the job held and used, as ``webapp.unused`` reads it: node by node where each
    node's own request and peak are known (``StaffJob.memory_nodes``), else the busiest
    node's peak x nodes."""
    return unused.Held(j.elapsed, j.cpus, j.cpu_seconds, j.gpus, None, j.memory_requested,
                       memory_peak(j), len(j.nodes), memory_by_node(j.memory_nodes))


def memory_efficiency(j: StaffJob) -> float | None:
    """The report's memory efficiency (``JobReport.memory_efficiency``): the judged node's
    peak over its own request; None where no node has both (the archive's query then
    falls back to the busiest peak over the request per node)."""
    judged = memory_judged(j.memory_nodes)
    if judged is None or judged.peak_bytes is None or not judged.requested_bytes:
        return None
    return judged.peak_bytes / judged.requested_bytes


def _h(seconds: float) -> str:
    return f"{seconds / HOUR:,.2f}"


def _pct(x: float | None) -> str:
    return format_percent(x) if x is not None else "n/a"


# Per user: (core-seconds with a CPU time, CPU seconds, GPU-seconds, GPU-seconds with a
# utilisation, GPU-seconds x utilisation). Summed here or by the archive's GROUP BY.
EfficiencyTotals = Mapping[str, tuple[float, float, float, float, float]]


def efficiency_totals(
    jobs: Iterable[StaffJob],
) -> dict[str, tuple[float, float, float, float, float]]:
    core, cpu, gpu, gpu_seen, gpu_used = (defaultdict[str, float](float) for _ in range(5))
    for j in jobs:
        core[j.user] += j.elapsed * j.cpus if j.cpu_seconds is not None else 0.0
        cpu[j.user] += j.cpu_seconds or 0.0
        gpu[j.user] += j.elapsed * j.gpus
        if j.gpus and j.gpu_utilization is not None:
            gpu_seen[j.user] += j.elapsed * j.gpus
            gpu_used[j.user] += j.elapsed * j.gpus * j.gpu_utilization
    return {u: (core[u], cpu[u], gpu[u], gpu_seen[u], gpu_used[u])
            for u in set(core) | set(gpu)}


def user_efficiency(jobs: list[StaffJob], cfg: StaffConfig, thresholds: Thresholds,
                    notices: Mapping[str, int]) -> Table:
    return efficiency_table(efficiency_totals(jobs), cfg, thresholds, notices)


def efficiency_table(totals: EfficiencyTotals, cfg: StaffConfig, thresholds: Thresholds,
                     notices: Mapping[str, int]) -> Table:
    core = {u: v[0] for u, v in totals.items()}
    cpu = {u: v[1] for u, v in totals.items()}
    gpu = {u: v[2] for u, v in totals.items()}
    gpu_seen = {u: v[3] for u, v in totals.items()}
    gpu_used = {u: v[4] for u, v in totals.items()}
    users = sorted(totals)
    rank_cpu = {u: i + 1 for i, u in enumerate(sorted(users, key=lambda u: (-core[u], u)))}
    rank_gpu = {u: i + 1 for i, u in enumerate(sorted(
        (u for u in users if gpu[u]), key=lambda u: (-gpu[u], u)))}
    rows = []
    for u in users:
        cpu_eff = cpu[u] / core[u] if core[u] else None
        gpu_eff = gpu_used[u] / gpu_seen[u] if gpu_seen[u] else None
        low_cpu = (core[u] >= thresholds.min_core_hours * HOUR and cpu_eff is not None
                   and cpu_eff < thresholds.cpu_efficiency_low)
        low_gpu = (gpu[u] >= thresholds.min_gpu_hours * HOUR and gpu_eff is not None
                   and gpu_eff < thresholds.low_efficiency_users_gpu_util)
        if not (low_cpu or low_gpu):
            continue
        n = notices.get(u, 0)
        rows.append(Row(
            (u, str(rank_cpu[u]), _h(core[u]), _pct(cpu_eff), str(rank_gpu.get(u, "")),
             _h(gpu[u]), _pct(gpu_eff), f"{n} in {cfg.notice_days:.0f} days" if n else ""),
            {"user": u, "rank_core_hours": rank_cpu[u], "core_hours": core[u] / HOUR,
             "cpu_efficiency": cpu_eff, "rank_gpu_hours": rank_gpu.get(u),
             "gpu_hours": gpu[u] / HOUR, "gpu_efficiency": gpu_eff, "notices": n},
            user=u))
    rows.sort(key=lambda r: (r.values["rank_core_hours"], r.values["user"]))
    return Table("low_efficiency_users", "Heaviest users with low CPU or GPU efficiency",
                 f"CPU efficiency below {_pct(thresholds.cpu_efficiency_low)} or GPU "
                 f"utilisation below {_pct(thresholds.low_efficiency_users_gpu_util)}; rank "
                 "among all users by hours used.",
                 ("user", "rank (core-h)", "core-hours", "CPU efficiency", "rank (GPU-h)",
                  "GPU-hours", "GPU utilisation", "alerts"), tuple(rows[: int(cfg.rows)]))


def _job_table(key: str, title: str, why: str, columns: tuple[str, ...],
               jobs: Iterable[StaffJob], cell: Callable[[StaffJob], Cell],
               sort: str, cfg: StaffConfig) -> Table:
    rows = []
    for j in jobs:
        got = cell(j)
        if got is not None:
            cells, values = got
            rows.append(Row((j.job_id, j.user, *cells), {"job": j.job_id, "user": j.user,
                                                         **values}, job=j.job_id))
    rows.sort(key=lambda r: (-float(r.values[sort] or 0), r.values["job"]))
    return Table(key, title, why, ("job", "user", *columns), tuple(rows[: int(cfg.rows)]))


def smaller_gpu(jobs: list[StaffJob], cfg: StaffConfig, thresholds: Thresholds) -> Table:
    def cell(j: StaffJob) -> Cell:
        if not j.gpus or j.gpu_utilization is None or not j.gpu_memory_total:
            return None
        used = j.gpu_memory_used or 0.0
        big = used > thresholds.smaller_gpu_memory * j.gpu_memory_total
        if j.gpu_utilization >= thresholds.smaller_gpu_util or big:
            return None
        gh = j.elapsed * j.gpus
        return ((str(j.gpus), _pct(j.gpu_utilization),
                 f"{format_bytes(used)} of {format_bytes(j.gpu_memory_total)}", _h(gh)),
                {"gpus": j.gpus, "gpu_utilization": j.gpu_utilization, "gpu_memory_used": used,
                 "gpu_memory_total": j.gpu_memory_total, "gpu_hours": gh / HOUR})
    return _job_table("smaller_gpu", "Jobs that could have used a smaller GPU or a MIG slice",
                      f"Mean GPU utilisation below {_pct(thresholds.smaller_gpu_util)} and peak "
                      f"GPU memory at most {_pct(thresholds.smaller_gpu_memory)} of the GPU's.",
                      ("GPUs", "GPU utilisation", "GPU memory peak", "GPU-hours"),
                      jobs, cell, "gpu_hours", cfg)


def mig_fit(jobs: list[StaffJob], thresholds: Thresholds) -> Table:
    """How many of the window's whole-card GPU jobs would have fitted which MIG slice of
    their card (peak memory x ``gpu_memory_margin`` and mean use within the slice's share
    of the card's compute, ``gpu_models.smallest_slice``): a site's question before it
    converts cards."""
    fits: Counter[str] = Counter()
    hours: defaultdict[str, float] = defaultdict(float)
    seen = 0
    for j in jobs:
        if not j.gpus or j.gpu_utilization is None or not j.gpu_memory_total:
            continue
        if not card_profiles(j.gpu_memory_total):
            continue  # a card MIG does not split, or a job already on a slice
        seen += 1
        need = (j.gpu_memory_used or 0.0) * thresholds.gpu_memory_margin
        name = smallest_slice(j.gpu_memory_total, need, j.gpu_utilization) or "whole card"
        fits[name] += 1
        hours[name] += j.elapsed * j.gpus / HOUR
    order = sorted(fits, key=lambda n: (n == "whole card", int(n.split("g.")[0])
                                        if n != "whole card" else 0, n))
    rows = tuple(Row((n, str(fits[n]), _pct(fits[n] / seen), f"{hours[n]:,.1f}"),
                     {"profile": n, "jobs": fits[n], "share": fits[n] / seen,
                      "gpu_hours": hours[n]}) for n in order)
    return Table("mig_fit", "GPU jobs a MIG slice would have held",
                 "Each whole-card GPU job by the smallest MIG slice of its card that holds its "
                 f"peak GPU memory x {thresholds.gpu_memory_margin:g} and its mean use (a "
                 "slice's share of the card's compute: 1g is a seventh).",
                 ("slice", "jobs", "share of GPU jobs", "GPU-hours"), rows)


def fragmentation(jobs: list[StaffJob], cfg: StaffConfig) -> Table:
    def cell(j: StaffJob) -> Cell:
        n = len(j.nodes)
        if n < 2 or j.gpus < 2 or j.gpus > n:
            return None
        gh = j.elapsed * j.gpus
        return ((str(n), str(j.gpus), _h(gh)), {"nodes": n, "gpus": j.gpus, "gpu_hours": gh / HOUR})
    return _job_table("gpu_fragmentation", "GPU fragmentation: one GPU per node over many nodes",
                      "Multi-node jobs with at most one GPU per node; packed on fewer nodes they "
                      "leave whole nodes free.", ("nodes", "GPUs", "GPU-hours"),
                      jobs, cell, "gpu_hours", cfg)


def idle_nodes(jobs: list[StaffJob], cfg: StaffConfig, thresholds: Thresholds) -> Table:
    def cell(j: StaffJob) -> Cell:
        if len(j.nodes) < 2 or not j.elapsed or not j.node_cpu_seconds:
            return None
        idle = unused.idle_nodes({n: s / j.elapsed for n, s in j.node_cpu_seconds.items()},
                          thresholds.node_idle_cores)
        if not idle:
            return None
        nh = len(idle) * j.elapsed
        return ((str(len(j.nodes)), ", ".join(idle), _h(nh)),
                {"nodes": len(j.nodes), "idle_nodes": ",".join(idle), "node_hours_idle": nh / HOUR})
    return _job_table("idle_nodes", "Multi-node jobs with idle nodes",
                      "Nodes whose mean CPU use stayed below "
                      f"{thresholds.node_idle_cores:g} cores.",
                      ("nodes", "idle nodes", "node-hours idle"), jobs, cell,
                      "node_hours_idle", cfg)


def large_memory(jobs: list[StaffJob], cfg: StaffConfig, thresholds: Thresholds) -> Table:
    need = thresholds.large_memory_need_gib * GIB

    def cell(j: StaffJob) -> Cell:
        peak = memory_peak(j)
        if j.partition not in cfg.large_memory_partitions or peak is None or peak >= need:
            return None
        return ((j.partition, format_bytes(peak), format_duration(j.elapsed)),
                {"partition": j.partition, "max_rss": peak, "elapsed": j.elapsed})
    return _job_table("large_memory", "Large-memory partitions used without need",
                      f"Jobs on {', '.join(cfg.large_memory_partitions) or '(none configured)'} "
                      f"whose peak stayed below {thresholds.large_memory_need_gib:g} GiB.",
                      ("partition", "peak memory", "elapsed"), jobs, cell, "elapsed", cfg)


def longest_queued(jobs: list[StaffJob], cfg: StaffConfig) -> Table:
    def cell(j: StaffJob) -> Cell:
        if j.wait is None:
            return None
        reasons = ", ".join(f"{r} ({format_duration(s)})" for r, s in j.pending_reasons)
        return ((j.partition, format_duration(j.wait), reasons or "not seen"),
                {"partition": j.partition, "wait": j.wait,
                 "reasons": ",".join(r for r, _ in j.pending_reasons)})
    return _job_table("longest_queued", "Longest-queued jobs and why they waited",
                      "Start minus submit; reasons as slurm-exporter saw them while the job was "
                      "pending.", ("partition", "waited", "reasons"), jobs, cell, "wait", cfg)


def energy_by(key: str, jobs: list[StaffJob], cfg: StaffConfig) -> Table:
    """kWh per account (``key="account"``) or per user, from the jobs with energy series."""
    joules: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for j in jobs:
        if j.energy_joules is not None:
            joules[getattr(j, key)] += j.energy_joules
            count[getattr(j, key)] += 1
    return energy_table(key, [(name, joules[name], count[name]) for name in joules], cfg)


def energy_table(key: str, sums: list[tuple[str, float, int]], cfg: StaffConfig) -> Table:
    """The energy table from (name, joules, jobs) sums: in memory or from the archive."""
    kwh = {name: joules / JOULES_PER_KWH for name, joules, _ in sums}
    count = {name: jobs for name, _, jobs in sums}
    total = sum(kwh.values())
    rows = [Row((name, f"{kwh[name]:,.3g}", _pct(kwh[name] / total if total else None),
                 str(count[name])),
                {key: name, "kwh": kwh[name], "share": kwh[name] / total if total else None,
                 "jobs": count[name]}, user=name if key == "user" else None)
            for name in sorted(kwh, key=lambda n: (-kwh[n], n))]
    return Table(f"energy_{key}s", f"Energy by {key}",
                 "kWh the exporter attributed to the jobs (CPU package by CPU time, memory, "
                 "GPUs, the rest of the node meter by cores); jobs on nodes without an energy "
                 "source are not counted.", (key, "kWh", "share", "jobs"),
                 tuple(rows[: int(cfg.rows)]))
