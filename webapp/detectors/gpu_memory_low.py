"""A large GPU whose memory the job barely used: a smaller GPU type or a MIG slice would
have done, named from the GPU types the job's partition has."""

from __future__ import annotations

from webapp.detectors.gpu_models import compute_share, is_mig, mig_profile, type_memory_bytes
from webapp.detectors.measures import gpu_mean, gpu_memory_peak, long_enough
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


def cluster_gpu_types(report: JobReport) -> list[str]:
    """GPU types the job's partition has (slurm-exporter's series while it waited)."""
    q = report.queue
    if q is None:
        return []
    names = [t for t, _ in (*q.gpus_available, *q.gpus_available_max)]
    names += list(q.requested_gpu_types)
    return sorted({n for n in names if n and n != "untyped"})


def smaller_types(report: JobReport, need: float, size: float,
                  busy: float | None = None) -> list[tuple[str, float]]:
    """Types (and MIG slices) of the cluster that hold ``need`` bytes and are smaller than
    ``size``, smallest first; a MIG slice only where its share of the card's compute holds
    ``busy`` too (the whole card's mean utilisation: 12 % fits a 1g slice's seventh)."""
    sized = [(t, m) for t in cluster_gpu_types(report) if (m := type_memory_bytes(t))]
    fits = [(t, m) for t, m in sized if need <= m < size
            and (busy is None or busy <= compute_share(t))]
    return sorted(fits, key=lambda tm: (tm[1], tm[0]))


class GpuMemoryLowDetector:
    name = "gpu_memory_low"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        size, peak = report.usage.gpu_memory_total_bytes, gpu_memory_peak(report)
        if not report.gpus or not size or peak is None or report.unfinished:
            return ()
        if (not long_enough(report, thresholds.min_runtime_seconds)
                or size < thresholds.gpu_memory_large_bytes):
            return ()
        if peak >= thresholds.gpu_memory_low * size:
            return ()  # below the share, as for gpu_util_low
        need = peak * thresholds.gpu_memory_margin
        busy = gpu_mean(report)
        fits = smaller_types(report, need, size, busy)
        known = cluster_gpu_types(report)
        if fits:
            slices = [n for n, _ in fits if is_mig(n)]
            whole = [n for n, _ in fits if not is_mig(n)]
            named = ", ".join(f"`--gres=gpu:{n}:1` ({format_bytes(m)})" for n, m in fits[:3])
            advice = (
                f"Ask for {named} next time"
                + (" (a MIG slice: a share of a large GPU)" if slices and not whole else "")
                + "; smaller GPUs are easier to get and leave the large ones to jobs that "
                "need their memory."
            )
            if is_mig(fits[0][0]) and busy is not None:  # the smallest that fits: a slice
                advice = (f"Its {format_bytes(peak)} peak and {format_percent(busy)} use "
                          f"would fit a {mig_profile(fits[0][0])} slice. " + advice)
        elif known:
            # the partition has no smaller type: nothing to suggest but the size needed
            return ()
        else:
            advice = (
                f"A GPU with {format_bytes(need)} or more would do: a smaller type or a MIG "
                "slice (`sinfo -o '%P %G'` lists your cluster's)."
            )
        return (
            Finding(
                name=self.name,
                severity=Severity.INFO,
                message=(
                    f"The job used at most {format_bytes(peak)} of its GPU's "
                    f"{format_bytes(size)} memory ({format_percent(peak / size)}): a smaller "
                    "GPU would hold it."
                ),
                advice=advice,
                evidence={
                    "gpu_memory_used_max_bytes": round(peak),
                    "gpu_memory_total_bytes": int(size),
                    "gpu_memory_needed_bytes": round(need),
                    "smaller_types": ", ".join(n for n, _ in fits) or "n/a",
                },
                evidence_text=(
                    f"Peak GPU memory {format_bytes(peak)} of {format_bytes(size)} "
                    f"({format_percent(peak / size)})."
                ),
            ),
        )
