"""Detectors: pure functions of a report and thresholds, each returning findings.

The registry is the explicit ``DETECTORS`` tuple; nothing registers itself on import.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from webapp.detectors.cpu_efficiency import LowCpuEfficiencyDetector
from webapp.detectors.gpu_idle import IdleGpuDetector
from webapp.detectors.gpu_util import LowGpuUtilizationDetector
from webapp.detectors.many_files import ManyFilesDetector
from webapp.detectors.memory_limit import OutOfMemoryDetector
from webapp.detectors.memory_waste import MemoryOverRequestDetector
from webapp.detectors.open_files_limit import OpenFilesLimitDetector
from webapp.detectors.outcome import OutcomeDetector
from webapp.detectors.oversubscription import OversubscriptionDetector
from webapp.detectors.scratch_io import ScratchIoDetector
from webapp.detectors.serial import SerialOnManyCoresDetector
from webapp.detectors.short_job import ShortJobDetector
from webapp.detectors.thresholds import Thresholds
from webapp.detectors.time_limit import TimeLimitOverRequestDetector
from webapp.model import Finding, JobReport, Severity

log = logging.getLogger(__name__)

__all__ = ["DETECTORS", "Detector", "Thresholds", "detect_all"]


class Detector(Protocol):
    name: str

    def detect(self, report: JobReport, t: Thresholds) -> tuple[Finding, ...]: ...


DETECTORS: tuple[Detector, ...] = (
    OutcomeDetector(),
    OutOfMemoryDetector(),
    IdleGpuDetector(),
    LowGpuUtilizationDetector(),
    LowCpuEfficiencyDetector(),
    SerialOnManyCoresDetector(),
    OversubscriptionDetector(),
    MemoryOverRequestDetector(),
    TimeLimitOverRequestDetector(),
    ShortJobDetector(),
    ScratchIoDetector(),
    ManyFilesDetector(),
    OpenFilesLimitDetector(),
)

SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


def detect_all(
    report: JobReport,
    thresholds: Thresholds | None = None,
    detectors: Iterable[Detector] = DETECTORS,
) -> tuple[Finding, ...]:
    """Every detector's findings, most severe first (then by name)."""
    t = thresholds or Thresholds()
    found: list[Finding] = []
    for detector in detectors:
        try:
            found.extend(detector.detect(report, t))
        except Exception:
            # One faulty detector must not cost the user the rest of the report.
            log.exception("detector %s failed on job %s", detector.name, report.job_id)
    return tuple(sorted(found, key=lambda f: (SEVERITY_RANK[f.severity], f.name)))
