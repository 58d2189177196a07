"""The request to make next time, computed from what a job used, or from what a set of
past runs used (``next_request``).

Shared by the detectors, the array summary and the history's ``#SBATCH`` block so that all
round the same way, and so that an array's tasks and a user's past jobs of one name, the
same runs either way, give the same ``--mem`` and ``--time``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from webapp.formatting import slurm_mem, slurm_time
from webapp.states import COMPLETED, OUT_OF_MEMORY, TIMEOUT, ended
from webapp.thresholds import Thresholds

PERCENTILE = 95  # of the runs' peaks and elapsed times: the typical run, not the exception


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


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (as numpy's default), q in 0..100; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class PastRun:
    """What one run tells the next request: a past job of the same name, or an array task.
    ``memory_limit_bytes`` is per node, as ``--mem`` is."""

    state: str
    peak_bytes: float | None
    elapsed_seconds: float | None
    memory_limit_bytes: float | None
    time_limit_seconds: float | None


def next_request(runs: Sequence[PastRun], thresholds: Thresholds) -> tuple[str | None, str | None]:
    """(``--mem``, ``--time``) for the next submission of these runs; None where none says.

    One policy for a user's history and for an array's tasks:

    - ``--mem``: the PERCENTILE of the ended runs' peaks times ``memory_margin``, but never
      less than the largest peak, rounded up (``slurm_mem``); after an OUT_OF_MEMORY, at
      least the largest killed run's limit times ``oom_growth`` (a killed run's peak is
      its limit, not what it needed).
    - ``--time``: the same over the elapsed times of the runs that COMPLETED, with
      ``time_margin``, rounded up (``round_up_time``); after a TIMEOUT, at least the
      largest limit that ran out times ``timeout_growth``.

    Why: Slurm kills a run over its ``--mem`` or ``--time``, so advice below any run's own
    figure would have killed that run, and "would have saved" would count a job that then
    fails: hence the largest run as the floor. The margin is headroom for how a typical run
    varies (and for a peak that fell between two samples); put on top of the largest run it
    would make one exceptional run (another input, a leak since fixed) cost every later run
    a fifth more again, so it goes on the percentile. With a few runs the percentile is
    close to the largest and the margin covers it; an array's tasks share one request, and
    the next job of a name may be its largest, so both get the same rule.
    """
    done = [r for r in runs if ended(r.state)]
    return _mem(done, thresholds), _time(done, thresholds)


def _covering(values: Sequence[float], margin: float) -> float:
    """The percentile with the margin, at least the largest value."""
    return max((percentile(values, PERCENTILE) or 0.0) * margin, max(values))


def _mem(done: Sequence[PastRun], thresholds: Thresholds) -> str | None:
    peaks = [float(r.peak_bytes) for r in done if r.peak_bytes]
    killed = [float(r.memory_limit_bytes) for r in done
              if r.state == OUT_OF_MEMORY and r.memory_limit_bytes]
    wanted = ([_covering(peaks, thresholds.memory_margin)] if peaks else []) + \
        ([max(killed) * thresholds.oom_growth] if killed else [])
    return slurm_mem(max(wanted)) if wanted else None


def _time(done: Sequence[PastRun], thresholds: Thresholds) -> str | None:
    elapsed = [float(r.elapsed_seconds) for r in done
               if r.state == COMPLETED and r.elapsed_seconds]
    out = [float(r.time_limit_seconds) for r in done
           if r.state == TIMEOUT and r.time_limit_seconds]
    wanted = ([_covering(elapsed, thresholds.time_margin)] if elapsed else []) + \
        ([max(out) * thresholds.timeout_growth] if out else [])
    return slurm_time(max(round_up_time(w) for w in wanted)) if wanted else None
