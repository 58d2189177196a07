"""Waste in the site's currency: every waste figure in its own unit, in billing units and,
where the site says what a billing unit is worth, in core-hours of its allocation.

The one computation of waste; every renderer reads ``JobReport.waste``.

- CPU: allocated core-hours (AllocCPUS x elapsed) minus used (TotalCPU, the report's
  ``cpu_seconds``), never below zero.
- GPU: allocated GPU-hours minus the GPUs' mean utilisation x elapsed (Prometheus); no
  figure without GPU series.
- Memory: requested GiB-hours minus the peak (busiest node, x nodes) x elapsed: memory
  held idle. Slurm's memory weights are per MB of 1024 KiB, so GiB = Slurm's G.

Billing units: a resource's unused amount x its TRESBillingWeights weight (the
partition's, from scontrol). With no weights configured Slurm bills the allocated CPUs
(billing = AllocCPUS), so one core-hour costs ``billing / cpus`` units and unused GPUs
and memory cost nothing; the job's own billing TRES (accounting DB ``tres_alloc`` id 5,
else sacct's AllocTRES) is the figure both cases rest on. ``PriorityFlags=MAX_TRES``
(billing = the largest weighted TRES) is not modelled: the figures then overstate.
"""

from __future__ import annotations

from collections.abc import Mapping

from webapp.model import JobReport, Waste, WasteItem

GIB = 1024**3
MB = 1024**2  # Slurm's MB, the unit of a memory billing weight
NO_WEIGHTS = ("no TRESBillingWeights on the partition: Slurm bills the allocated CPUs, "
              "so a core-hour costs billing / CPUs units")
WEIGHTS = "the partition's TRESBillingWeights"


def _gpu_used_hours(report: JobReport, hours: float) -> float | None:
    means = [m for s in report.usage.gpu_utilization if (m := s.mean()) is not None]
    return sum(means) * hours if means else None


def compute_waste(report: JobReport, weights: Mapping[str, float] | None = None,
                  core_hours_per_billing_unit: float = 0.0) -> Waste | None:
    """The waste of an ended (or running) job; None without elapsed time or CPUs."""
    if not report.elapsed_seconds or not report.cpus:
        return None
    hours = report.elapsed_seconds / 3600
    weights = dict(weights or {})
    source = WEIGHTS if weights else NO_WEIGHTS
    if not weights and report.billing:
        weights = {"cpu": report.billing / report.cpus}
    # (resource, unit, requested, used, weight per unit-hour)
    rows: list[tuple[str, str, float, float | None, float | None]] = []
    cpu_used = None if report.cpu_seconds is None else report.cpu_seconds / 3600
    rows.append(("cpu", "core-hours", report.cpus * hours, cpu_used, weights.get("cpu")))
    if report.gpus:
        gpu_weight = weights.get("gres/gpu", 0.0 if "cpu" in weights else None)
        rows.append(("gpu", "GPU-hours", report.gpus * hours, _gpu_used_hours(report, hours),
                     gpu_weight))
    if report.memory_requested_bytes:
        peak = report.memory_peak_bytes
        used = None if peak is None else peak * max(1, len(report.nodes)) / GIB * hours
        mem_weight = weights.get("mem")
        rows.append(("memory", "GiB-hours", report.memory_requested_bytes / GIB * hours, used,
                     mem_weight * GIB / MB if mem_weight is not None
                     else (0.0 if "cpu" in weights else None)))
    items = []
    for resource, unit, requested, used, weight in rows:
        unused = None if used is None else max(0.0, requested - used)
        if unused is None:
            continue
        units = None if weight is None else unused * weight
        core_hours = (units * core_hours_per_billing_unit
                      if units is not None and core_hours_per_billing_unit else None)
        items.append(WasteItem(resource, unit, requested, unused, weight, units, core_hours))
    return Waste(tuple(items), report.billing, source, core_hours_per_billing_unit or None)
