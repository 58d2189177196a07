"""Waste in the site's currency: every waste figure in its own unit, in billing units and,
where the site says what a billing unit is worth, in core-hours of its allocation.

The amounts are ``webapp.unused``'s, the one computation of waste (the report's
``JobReport.waste``, which every renderer reads, the job lists, the weekly digest and the
staff report all call it); this module prices them for one report.

Billing units: a resource's unused amount x its TRESBillingWeights weight (the
partition's, from scontrol). With no weights configured Slurm bills the allocated CPUs
(billing = AllocCPUS), so one core-hour costs ``billing / cpus`` units and unused GPUs
and memory cost nothing; the job's own billing TRES (accounting DB ``tres_alloc`` id 5,
else sacct's AllocTRES) is the figure both cases rest on. ``PriorityFlags=MAX_TRES``
(billing = the largest weighted TRES) is not modelled: the figures then overstate.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobreport_common.units import GIB, MIB
from webapp.model import JobReport, Waste, WasteItem
from webapp.unused import Held, gpus_busy, unused

NO_WEIGHTS = ("no TRESBillingWeights on the partition: Slurm bills the allocated CPUs, "
              "so a core-hour costs billing / CPUs units")
WEIGHTS = "the partition's TRESBillingWeights"


def held_by(report: JobReport) -> Held:
    """A report's own figures, as ``unused`` reads them."""
    return Held(report.elapsed_seconds, report.cpus, report.cpu_seconds, report.gpus,
                gpus_busy(s.mean() for s in report.usage.gpu_utilization),
                report.memory_requested_bytes,
                report.memory_peak_bytes, len(report.nodes), report.memory_by_node)


def compute_waste(report: JobReport, weights: Mapping[str, float] | None = None,
                  core_hours_per_billing_unit: float = 0.0) -> Waste | None:
    """The waste of an ended (or running) job, priced; None without elapsed time or CPUs."""
    amounts = unused(held_by(report))
    if not amounts:
        return None
    weights = dict(weights or {})
    source = WEIGHTS if weights else NO_WEIGHTS
    if not weights and report.billing and report.cpus:
        weights = {"cpu": report.billing / report.cpus}
    # Billing units per unit-hour: with CPU-only billing, GPUs and memory cost nothing.
    free = 0.0 if "cpu" in weights else None
    mem_weight = weights.get("mem")
    per_unit = {"cpu": weights.get("cpu"), "gpu": weights.get("gres/gpu", free),
                "memory": mem_weight * GIB / MIB if mem_weight is not None else free}
    items = []
    for a in amounts.values():
        if a.unused is None:
            continue
        weight = per_unit[a.resource]
        units = None if weight is None else a.unused * weight
        core_hours = (units * core_hours_per_billing_unit
                      if units is not None and core_hours_per_billing_unit else None)
        items.append(WasteItem(a.resource, a.unit, a.requested, a.unused, weight, units,
                               core_hours))
    return Waste(tuple(items), report.billing, source, core_hours_per_billing_unit or None)
