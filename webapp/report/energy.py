"""The job's energy in the report's terms: joules per node, the part its unused allocation
drew, and grams of CO2e at the site's carbon intensity. The one computation of energy;
every renderer reads ``JobReport.energy``.

- Energy: what the exporter split to the job (``jobs_energy_joules_total``, exporter
  README "Energy per job"), summed over nodes and sources.
- Unused allocation: the node meter's share the job's cores carry (source ``other``)
  times the CPU time left unused (1 - CPU efficiency), plus each GPU's joules times its
  idle fraction (1 - its mean utilisation). A GPU's joules are the exporter's per-GPU
  ``gpu`` series (``Usage.gpu_energy``), whose sum is the job's GPU energy: the idle-GPU
  finding quotes the same figure. An estimate: an idle core or GPU draws less than
  a busy one, and ``other`` is split by cores whatever they do.
- CO2e: kWh x the intensity, a constant (``JOBREPORT_CARBON_INTENSITY=<g/kWh>``) or the
  mean over the job's run of a Prometheus series a site feeds with its grid's figure
  (``promql:<selector>``); without either, the yearly average of the site's country
  (``JOBREPORT_CARBON_COUNTRY``, webapp/carbon.py), named with its year and source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webapp.carbon import country_intensity
from webapp.formatting import JOULES_PER_KWH
from webapp.model import Energy, JobReport
from webapp.settings import parse_intensity_setting


@dataclass(frozen=True)
class Intensity:
    grams_per_kwh: float | None
    source: str  # in words, for the report


def series_query(selector: str, seconds: float) -> str:
    """The mean of the site's intensity series over the job's run."""
    return f"avg(avg_over_time({selector}[{max(int(seconds), 60)}s]))"


def intensity_for(setting: str, report: JobReport,
                  vector: Callable[[str, float], list[tuple[dict[str, str], float]]] | None,
                  country: str = "") -> Intensity | None:
    """The intensity that applies to the job's run: the site's constant or series
    (``setting``), else ``country``'s yearly average; None when neither is configured. A
    series without samples over the run gives an intensity of None (shown as unknown)."""
    parsed = parse_intensity_setting(setting)
    if parsed is None:
        default = country_intensity(country)
        return Intensity(default.grams_per_kwh, default.source) if default else None
    if isinstance(parsed, float):
        return Intensity(parsed, "constant (JOBREPORT_CARBON_INTENSITY)")
    source = f"mean of {parsed} over the run"
    if vector is None or report.end_time is None or report.elapsed_seconds is None:
        return Intensity(None, source)
    answer = vector(series_query(parsed, report.elapsed_seconds), report.end_time.timestamp())
    return Intensity(answer[0][1] if answer else None, source)


def compute_energy(report: JobReport, intensity: Intensity | None) -> Energy | None:
    u = report.usage
    if u.energy_joules is None:
        return None
    unused_cores = None
    if u.energy_other_joules is not None and report.cpu_efficiency is not None:
        unused_cores = u.energy_other_joules * (1 - min(max(report.cpu_efficiency, 0.0), 1.0))
    unused_gpus = None
    means = {s.label: m for s in u.gpu_utilization if (m := s.mean()) is not None}
    per_gpu = dict(u.gpu_energy)
    if per_gpu and set(per_gpu) <= set(means):
        unused_gpus = sum(j * (1 - min(means[g], 1.0)) for g, j in per_gpu.items())
    elif u.energy_gpu_joules is not None and means:  # an exporter without per-GPU series
        unused_gpus = u.energy_gpu_joules * (1 - min(sum(means.values()) / len(means), 1.0))
    grams = intensity.grams_per_kwh if intensity else None
    return Energy(
        joules=u.energy_joules,
        by_node=u.energy_by_node,
        unused_cores_joules=unused_cores,
        unused_gpus_joules=unused_gpus,
        intensity_g_per_kwh=grams,
        intensity_source=intensity.source if intensity else "",
        co2e_grams=None if grams is None else u.energy_joules / JOULES_PER_KWH * grams,
    )
