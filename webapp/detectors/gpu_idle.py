"""Allocated GPUs that did no work at all (judged per GPU, whether or not a process held it)."""

from __future__ import annotations

from webapp.detectors.gpu_input_bound import input_bound
from webapp.detectors.measures import gpu_series, gpu_terms, long_enough
from webapp.formatting import format_energy, format_percent
from webapp.model import GPU_REPLAYS, Finding, JobReport, Series, Severity
from webapp.thresholds import Thresholds


def _sentence(allocated: int, idle: list[Series]) -> str:
    """'1 GPU allocated; it was idle for the whole job (never above 0.4% busy).'"""
    top = format_percent(max((s.max() or 0.0) for s in idle))
    if allocated == 1 and len(idle) == 1:
        return f"1 GPU allocated; it was idle for the whole job (never above {top} busy)."
    which = ", ".join(s.label for s in idle)
    return (f"{allocated} GPUs allocated; {len(idle)} of them ({which}) idle for the whole "
            f"job, never above {top} busy.")


def _idle_energy(report: JobReport, idle: list[Series]) -> float | None:
    """Joules the idle GPUs drew (each GPU's joules as the exporter attributed them to the
    job, ``Usage.gpu_energy``: the energy report's figure too); None without them."""
    joules = dict(report.usage.gpu_energy)
    found = [joules[s.label] for s in idle if s.label in joules]
    return sum(found) if found else None


def _drew(report: JobReport, idle: list[Series], joules: float) -> str:
    """The idle GPUs' energy as the finding says it: an estimate where a device's power is
    a share of its card's (a MIG device, an AMD partition: ``GpuDevice.power_share``), and
    no measurement where its node replayed a recording (``_replayed``)."""
    shares = {d.gpu: d.power_share for d in report.usage.gpu_devices if d.power_share}
    estimated = sorted({shares[s.label] for s in idle if s.label in shares})
    text = format_energy(joules)
    if estimated:
        text = (f"about {text} (an estimate: {' and '.join(estimated)} of its card's power, "
                "the card metering no MIG device or partition of its own)")
    return text + _replayed(report, idle)


def _replayed(report: JobReport, idle: list[Series]) -> str:
    """' (replayed from ..., not measured)' where an idle GPU's node played recorded GPU
    readings back (``Usage.replayed``: a test or demo stack); '' where they were read."""
    nodes = {s.label.split("/", 1)[0] for s in idle}
    recordings = sorted({r.recording or "a recording" for r in report.usage.replayed
                         if r.node in nodes and r.source in GPU_REPLAYS})
    if not recordings:
        return ""
    return f" (replayed from {' and '.join(recordings)}, not measured)"


class IdleGpuDetector:
    name = "gpu_idle"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        series = gpu_series(report)
        if not report.gpus or not series or not long_enough(report, thresholds.min_runtime_seconds):
            return ()
        idle = [s for s in series if (s.mean() or 0.0) < thresholds.gpu_idle]
        if not idle:
            return ()
        if len(idle) == len(series) and input_bound(report, thresholds):
            return ()  # the program held the GPU while one core worked: gpu_input_bound
        allocated = max(report.gpus, len(series))
        used = len(series) - len(idle)
        unseen = allocated - len(series)  # no data is not evidence of idleness
        labels = ", ".join(s.label for s in idle)
        if used == 0 and not unseen:
            message = (
                f"None of the {allocated} allocated GPU(s) did any work: utilisation stayed "
                f"below {format_percent(thresholds.gpu_idle)} for the whole job."
            )
            variable, tool = gpu_terms(report)
            advice = (
                "If the program is meant to use a GPU, check that it was built with GPU support "
                f"and sees the device (`{variable}`; `{tool}` on the node shows what runs "
                "there); otherwise submit it without --gres=gpu / --gpus so the GPU stays "
                "free for others."
            )
        else:
            message = (
                f"{len(idle)} of {allocated} allocated GPUs stayed idle for the whole job "
                f"(GPU {labels})" + (f"; {unseen} had no data." if unseen else ".")
            )
            spread = (
                "make the program spread its work over every GPU (one process per GPU, "
                "e.g. torchrun / DistributedDataParallel)"
            )
            advice = (
                f"Ask for `--gres=gpu:{used + unseen}` next time, or {spread}."
                if used + unseen
                else f"Check that the program uses the GPUs, or {spread}."
            )
        drew = _idle_energy(report, idle)
        if drew is not None:
            plural = "s" if len(idle) > 1 else ""
            message += f" The idle GPU{plural} drew {_drew(report, idle, drew)}."
        return (
            Finding(
                name=self.name,
                severity=Severity.CRITICAL,
                message=message,
                advice=advice,
                evidence_text=_sentence(allocated, idle),
                evidence={
                    "gpus_allocated": allocated,
                    "gpus_idle": len(idle),
                    "idle_gpus": labels,
                    "idle_max_utilization": max((s.max() or 0.0) for s in idle),
                    **({"idle_gpus_energy_joules": drew} if drew is not None else {}),
                },
            ),
        )
