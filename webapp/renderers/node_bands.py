"""Per-node series of a job on many nodes, collapsed into a few lines a reader can follow.

A plot of 1,000 nodes' lines is one smear and costs matplotlib seconds; a table of 1,000
rows is pages. Past ``MAX_LINES`` nodes the series become quantile bands over the nodes
at each time (max, 90th percentile, median, 10th percentile, min), and a table keeps the
``TOP`` busiest and idlest nodes by their mean. Both are pure functions of the series.
"""

from __future__ import annotations

from collections.abc import Sequence

from webapp.model import Series

MAX_LINES = 16  # up to this many nodes, one line (or row) each
TOP = 10  # busiest and idlest kept by ``extremes``
QUANTILES = (("max", 1.0), ("90th percentile", 0.9), ("median", 0.5),
             ("10th percentile", 0.1), ("min", 0.0))


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def bands(series: Sequence[Series], max_lines: int | None = None) -> list[Series]:
    """``series`` itself up to ``max_lines`` (``MAX_LINES``); else one series per quantile
    over the nodes that have a sample at each time (the range queries share steps)."""
    if len(series) <= (MAX_LINES if max_lines is None else max_lines):
        return list(series)
    at: dict[float, list[float]] = {}
    for s in series:
        for t, v in s.points:
            at.setdefault(t, []).append(v)
    times = sorted(at)
    ordered = {t: sorted(at[t]) for t in times}
    n = len(series)
    return [Series(f"{name} of {n} nodes", tuple((t, _quantile(ordered[t], q)) for t in times))
            for name, q in QUANTILES]


def extremes(series: Sequence[Series], top: int | None = None) -> tuple[list[Series], int]:
    """The ``top`` busiest and ``top`` idlest series by mean (busiest first), and how many
    were left out; all of them, busiest first, when that is no more than 2 x ``top``."""
    top = TOP if top is None else top
    ranked = sorted(series, key=lambda s: (-(s.mean() or 0.0), s.label))
    if len(ranked) <= 2 * top:
        return ranked, 0
    return ranked[:top] + ranked[-top:], len(ranked) - 2 * top
