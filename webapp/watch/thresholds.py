"""What `jobreport watch` calls idle, growing or late: one record, overridable by name
(``JOBREPORT_WATCH=gpu_idle_seconds=1800,...``). Durations in seconds, ratios 0..1."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webapp.detectors.thresholds import with_overrides

MIB = 1024**2


@dataclass(frozen=True)
class WatchThresholds:
    # every allocated GPU below gpu_idle (mean) for this long
    gpu_idle_seconds: float = 3600.0
    gpu_idle: float = 0.01
    # one node of a multi-node job below node_idle_cores (mean cores busy) for this long
    node_idle_seconds: float = 1800.0
    node_idle_cores: float = 0.01
    # memory growth fitted over this window, projected to the job's time limit
    memory_fit_seconds: float = 1800.0
    memory_min_points: float = 6.0
    memory_min_growth: float = 0.05  # the fit must add >= 5 % of the limit: no alarm on noise
    # a job this far into its time limit that wrote less than output_min_bytes lately
    time_used: float = 0.90
    output_seconds: float = 1800.0
    output_min_bytes: float = 1 * MIB
    # many small writes, off scratch, in the last small_files_seconds
    small_files_seconds: float = 600.0
    small_files_writes: float = 10_000.0
    small_write_bytes: float = 8192.0
    # share of a window the series must cover before a rule judges it
    coverage: float = 0.8

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, float]) -> WatchThresholds:
        """Defaults with ``overrides`` applied; an unknown name is a ValueError naming it."""
        return with_overrides(cls, overrides, "watch threshold")
