"""The request to make next time, computed from what a job used.

Shared by the detectors and the array summary so that both round the same way.
"""

from __future__ import annotations

import math

from webapp.formatting import slurm_mem, slurm_time


def next_mem(peak_bytes: float, margin: float) -> str:
    """``--mem`` value: the peak plus ``margin`` headroom, rounded up (``6G``, ``800M``)."""
    return slurm_mem(peak_bytes * margin)


def round_up_time(seconds: float) -> float:
    """Round up to a step people would type: 5 min under 1 h, 30 min under 1 day, else 1 h."""
    step = 300 if seconds <= 3600 else 1800 if seconds <= 86400 else 3600
    return max(step, math.ceil(seconds / step - 1e-9) * step)


def next_time(elapsed_seconds: float, margin: float) -> str:
    """``--time`` value: elapsed plus ``margin`` headroom, rounded up (``02:30:00``)."""
    return slurm_time(round_up_time(elapsed_seconds * margin))


def next_cpus(busy_cores: float, margin: float = 1.0) -> int:
    """Cores to ask for when ``busy_cores`` were busy on average (at least one)."""
    return max(1, math.ceil(busy_cores * margin - 0.05))
