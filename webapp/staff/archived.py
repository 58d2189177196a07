"""The staff report from the archive: the same tables as ``staff.build``, with the sums
and the rankings done by the database (``webapp.archive.staff_rows``).

Per-user tables read one GROUP BY row per user; each per-job table reads only the rows
its filter keeps, largest first, ``rows`` of them, and hands them to the very function
the in-memory path uses, so both paths filter, sort and format alike. ``staff_row`` is
the one mapping of a ``StaffJob`` to its archived row and back; ``report_staff_job`` is
the staff figures of a job the sync archives, read off the report it built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobreport_common.units import GIB
from webapp.archive.staff_rows import StaffRows, Window
from webapp.model import JobReport
from webapp.staff.build import memory_table, offenders, time_table
from webapp.staff.data import StaffJob
from webapp.staff.tables import (
    HOUR,
    StaffReport,
    efficiency_table,
    energy_table,
    fragmentation,
    held,
    idle_nodes,
    large_memory,
    longest_queued,
    memory_efficiency,
    memory_peak,
    mig_fit,
    smaller_gpu,
)
from webapp.thresholds import StaffConfig, Thresholds
from webapp.unused import memory_used_bytes
from webapp.watch_records import AlertRecord


def staff_row(cluster: str, j: StaffJob) -> dict[str, Any]:
    """The archived row of one ended job (the peak as the report computes it)."""
    return {
        "cluster": cluster, "job_id": j.job_id, "submit_time": int(j.submit or 0),
        "end_time": int(j.end or 0), "raw_id": j.raw_id, "user_name": j.user,
        "account": j.account, "partition_name": j.partition, "state": j.state,
        "submit": j.submit, "start_time": j.start, "end_at": j.end, "elapsed": j.elapsed,
        "time_limit": j.time_limit, "cpus": j.cpus, "node_count": len(j.nodes),
        "nodes": ",".join(j.nodes), "memory_requested": j.memory_requested, "gpus": j.gpus,
        "cpu_seconds": j.cpu_seconds, "memory_peak": memory_peak(j),
        "gpu_utilization": j.gpu_utilization, "gpu_memory_used": j.gpu_memory_used,
        "gpu_memory_total": j.gpu_memory_total,
        "node_cpu": json.dumps(j.node_cpu_seconds) if j.node_cpu_seconds else None,
        "pending_reasons": json.dumps(j.pending_reasons) if j.pending_reasons else None,
        "energy_joules": j.energy_joules,
        "memory_used": memory_used_bytes(held(j)) if j.memory_nodes else None,
        "memory_efficiency": memory_efficiency(j),
    }


def _ts(t: Any) -> float | None:
    return t.timestamp() if t is not None else None


def report_staff_job(report: JobReport, submit_time: int, end_time: int) -> StaffJob:
    """The staff figures of an ended job from its report, keyed as the sync archives it.

    The sacct side is the report's (after precedence, as the staff window's sacct call
    reads it); the Prometheus side is what the window's bulk queries ask, taken from
    the report's series: the GPUs' mean use and highest memory, each node's CPU seconds
    (its mean cores busy x elapsed), the energy counters, the pending reasons. The peak
    is the report's own (the busiest node's; sacct's estimate when Prometheus has none).
    """
    u = report.usage
    elapsed = report.elapsed_seconds or 0.0
    gpu_memory = [m for s in u.gpu_memory_used if (m := s.max()) is not None]
    node_cpu = {s.label: mean * elapsed for s in u.cpu_cores
                if (mean := s.mean()) is not None} if elapsed else {}
    reasons = report.queue.reasons if report.queue is not None else ()
    return StaffJob(
        report.job_id, report.metrics_id or report.job_id, report.user or "",
        report.account or "", report.partition or "", report.state or "",
        float(submit_time) if submit_time else _ts(report.submit_time),
        _ts(report.start_time), float(end_time) if end_time else _ts(report.end_time),
        elapsed, report.time_limit_seconds, report.cpus or 0, report.nodes,
        report.memory_requested_bytes, report.gpus, report.cpu_seconds,
        report.memory_peak_bytes, report.gpu_utilization,
        max(gpu_memory) if gpu_memory else None,
        float(u.gpu_memory_total_bytes) if u.gpu_memory_total_bytes is not None else None,
        node_cpu, tuple((r.reason, r.seconds) for r in reasons),
        energy_joules=u.energy_joules, memory_nodes=report.memory_nodes)


def staff_job(r: Mapping[str, Any]) -> StaffJob:
    """An archived row as the staff tables read it (the stored peak stands in for MaxRSS)."""
    return StaffJob(
        r["job_id"], r["raw_id"], r["user_name"], r["account"], r["partition_name"],
        r["state"], r["submit"], r["start_time"], r["end_at"], float(r["elapsed"]),
        r["time_limit"], int(r["cpus"]), tuple(filter(None, r["nodes"].split(","))),
        r["memory_requested"], int(r["gpus"]), r["cpu_seconds"], r["memory_peak"],
        r["gpu_utilization"], r["gpu_memory_used"], r["gpu_memory_total"],
        json.loads(r["node_cpu"]) if r["node_cpu"] else {},
        tuple(tuple(p) for p in json.loads(r["pending_reasons"] or "[]")),
        energy_joules=r["energy_joules"])


def build_staff_report_sql(rows: StaffRows, cluster: str, since: float, until: float,
                           cfg: StaffConfig, thresholds: Thresholds,
                           alerts: Mapping[str, list[AlertRecord]]) -> StaffReport:
    """``staff.build.build_staff_report`` over the archived jobs that ended in
    [since, until]."""
    w = Window(cluster, since, until, cfg.partitions)
    n = int(cfg.rows)
    long_enough = f"elapsed >= {float(thresholds.min_runtime_hours * HOUR)!r}"

    def top(where: str, params: tuple[Any, ...] = (), order: str | None = None,
            limit: int | None = n) -> list[StaffJob]:
        return [staff_job(r) for r in rows.top(w, where, params, order, limit)]

    scan = rows.window_totals(w)  # the per-user sums and the energy per account at once
    totals = scan.users
    notices = {u: len(a) for u, a in alerts.items()}
    efficiency = {t["user"]: (t["core_seconds"], t["cpu_seconds"], t["gpu_seconds"],
                              t["gpu_seen_seconds"], t["gpu_used_seconds"]) for t in totals}
    memory = {t["user"]: (t["memory_unused"], t["memory_requested"])
              for t in totals if t["memory_jobs"]}
    times = {t["user"]: (t["time_unused"], t["time_requested"]) for t in totals if t["time_jobs"]}
    parts = cfg.large_memory_partitions
    tables = (
        efficiency_table(efficiency, cfg, thresholds, notices),
        smaller_gpu(top(f"{long_enough} AND gpus > 0 AND gpu_utilization IS NOT NULL AND"
                        " gpu_memory_total > 0 AND gpu_utilization < ? AND"
                        " COALESCE(gpu_memory_used, 0) <= ? * gpu_memory_total",
                        (thresholds.smaller_gpu_util, thresholds.smaller_gpu_memory),
                        "elapsed * gpus"), cfg, thresholds),
        mig_fit(top(f"{long_enough} AND gpus > 0 AND gpu_utilization IS NOT NULL AND"
                    " gpu_memory_total >= ?", (20 * GIB,), limit=None), thresholds),
        fragmentation(top(f"{long_enough} AND node_count >= 2 AND gpus >= 2 AND"
                          " gpus <= node_count", (), "elapsed * gpus"), cfg),
        # Which nodes idled depends on each node's figure: every candidate, ranked here.
        idle_nodes(top(f"{long_enough} AND node_count >= 2 AND elapsed > 0 AND"
                       " node_cpu IS NOT NULL", limit=None), cfg, thresholds),
        memory_table(memory, cfg),
        time_table(times, cfg),
        large_memory(top(f"{long_enough} AND memory_peak IS NOT NULL AND memory_peak < ?"
                         f" AND partition_name IN ({', '.join('?' for _ in parts)})",
                         (thresholds.large_memory_need_gib * GIB, *parts), "elapsed")
                     if parts else [], cfg, thresholds),
        longest_queued(top("start_time > 0 AND submit > 0", (), "start_time - submit"), cfg),
        offenders(alerts, cfg),
        energy_table("account", scan.account_energy, cfg),
        energy_table("user", [(u["user"], u["energy_joules"], int(u["energy_jobs"]))
                              for u in totals if u["energy_jobs"]], cfg),
    )
    return StaffReport(cluster, since, until, rows.count(w), cfg, thresholds, tables)
