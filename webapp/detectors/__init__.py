"""Detectors: pure functions of a report and thresholds, each returning findings.

The registry is the explicit ``DETECTORS`` tuple; nothing registers itself on import.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from webapp.detectors.cpu_efficiency_low import LowCpuEfficiencyDetector
from webapp.detectors.cpu_starved import CpuStarvedDetector
from webapp.detectors.gpu_cores_idle import GpuCoresIdleDetector
from webapp.detectors.gpu_idle import IdleGpuDetector
from webapp.detectors.gpu_input_bound import GpuInputBoundDetector
from webapp.detectors.gpu_memory_low import GpuMemoryLowDetector
from webapp.detectors.gpu_type_unavailable import GpuTypeUnavailableDetector
from webapp.detectors.gpu_util_low import LowGpuUtilDetector
from webapp.detectors.hardware_fault import HardwareFaultDetector
from webapp.detectors.io_not_on_scratch import IoNotOnScratchDetector
from webapp.detectors.io_starved import IoStarvedDetector
from webapp.detectors.many_open_files import ManyOpenFilesDetector
from webapp.detectors.memory_growth import MemoryGrowthDetector
from webapp.detectors.memory_in_tmpfs import MemoryInTmpfsDetector
from webapp.detectors.memory_near_limit import MemoryNearLimitDetector
from webapp.detectors.memory_over_requested import MemoryOverRequestedDetector
from webapp.detectors.memory_thrashing import MemoryThrashingDetector
from webapp.detectors.node_idle import NodeIdleDetector
from webapp.detectors.open_files_near_limit import OpenFilesNearLimitDetector
from webapp.detectors.out_of_memory import OutOfMemoryDetector
from webapp.detectors.outcome import OutcomeDetector
from webapp.detectors.oversubscribed import OversubscribedDetector
from webapp.detectors.policy import NO_POLICY, Policy, Resolved, apply, job_scope
from webapp.detectors.rules_version import code_sources, code_version, threshold_defaults
from webapp.detectors.serial_on_many_cores import SerialOnManyCoresDetector
from webapp.detectors.short_job import ShortJobDetector
from webapp.detectors.small_io import SmallIoDetector
from webapp.detectors.time_limit_past_usual import TimeLimitPastUsualDetector
from webapp.detectors.time_over_requested import TimeOverRequestedDetector
from webapp.model import Finding, JobReport
from webapp.thresholds import Thresholds

log = logging.getLogger(__name__)

__all__ = ["DETECTORS", "NAMES", "RULES_VERSION", "Detector", "Thresholds", "detect_all", "judge"]

# The code's version, shown in every report's audit section beside the site policy's:
# derived from the sources of every module a verdict rests on and the thresholds'
# defaults (rules_version.py), so two reports can be compared.
RULES_VERSION = code_version(code_sources(), threshold_defaults())


class Detector(Protocol):
    name: str

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]: ...


DETECTORS: tuple[Detector, ...] = (
    OutcomeDetector(),
    HardwareFaultDetector(),
    OutOfMemoryDetector(),
    MemoryNearLimitDetector(),
    MemoryGrowthDetector(),
    MemoryInTmpfsDetector(),
    IdleGpuDetector(),
    LowGpuUtilDetector(),
    GpuInputBoundDetector(),
    GpuCoresIdleDetector(),
    GpuMemoryLowDetector(),
    LowCpuEfficiencyDetector(),
    CpuStarvedDetector(),
    IoStarvedDetector(),
    MemoryThrashingDetector(),
    SerialOnManyCoresDetector(),
    OversubscribedDetector(),
    NodeIdleDetector(),
    MemoryOverRequestedDetector(),
    TimeOverRequestedDetector(),
    ShortJobDetector(),
    IoNotOnScratchDetector(),
    ManyOpenFilesDetector(),
    SmallIoDetector(),
    OpenFilesNearLimitDetector(),
    GpuTypeUnavailableDetector(),
    TimeLimitPastUsualDetector(),
)
NAMES = frozenset(d.name for d in DETECTORS)

def detect_all(
    report: JobReport,
    thresholds: Thresholds | None = None,
    detectors: Iterable[Detector] = DETECTORS,
) -> tuple[Finding, ...]:
    """Every detector's findings, most severe first (then by name)."""
    thresholds = thresholds or Thresholds()
    found: list[Finding] = []
    for detector in detectors:
        try:
            found.extend(detector.detect(report, thresholds))
        except Exception:
            # One faulty detector must not cost the user the rest of the report.
            log.exception("detector %s failed on job %s", detector.name, report.job_id)
    return tuple(sorted(found, key=lambda f: (f.severity.rank, f.name)))


def judge(report: JobReport, thresholds: Thresholds | None = None,
          policy: Policy = NO_POLICY) -> tuple[tuple[Finding, ...], Resolved]:
    """The findings under the site's policy: its effective thresholds and switches for the
    job's scope resolved once, the detectors run with them, the severities it sets, then
    its own rules' findings. Also what was resolved (``jobreport policy explain``)."""
    resolved = policy.resolve(thresholds or Thresholds(), job_scope(report))
    on = [d for d in DETECTORS if d.name not in resolved.off]
    return apply(report, resolved, detect_all(report, resolved.thresholds, on)), resolved
