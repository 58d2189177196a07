"""The cluster page's usage plot: GPUs allocated per account over the last days, with each
account's allocation target (gpu_years for the year = that many GPUs on average). The time
axis ends at now: the source's last point is at the query time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from webapp.model import Series
from webapp.renderers.charts import MAX_LEGEND, _figure, to_svg

if TYPE_CHECKING:
    from matplotlib.typing import ColorType


def usage_svg(series: Sequence[Series], targets: Mapping[str, float],
              now: float) -> tuple[str, str] | None:
    """(svg, one-line summary) or None when there is nothing to draw."""
    if not any(s.points for s in series) and not targets:
        return None
    fig, ax = _figure("GPUs allocated per account (running jobs)")
    colors: dict[str, ColorType] = {}
    left, div, unit = time_axis(series, now)
    for i, s in enumerate(sorted(series, key=lambda s: s.label)):
        xs = [(t - now) / div for t, _ in s.points]
        (line,) = ax.plot(xs, s.values, label=s.label if i < MAX_LEGEND else None)
        colors[s.label] = line.get_color()
    for account, gpus in sorted(targets.items()):
        ax.axhline(gpus, linestyle="--", linewidth=1, color=colors.get(account, "0.4"),
                   label=f"{account} target {gpus:g}")
    # From the first point to now, no margin: matplotlib's 5 % past the last point would
    # put the right edge in the future, and the lines would seem to stop before now.
    ax.set_xlim(left, 0)
    ax.set_xlabel(f"{unit} before now", fontsize=8)
    ax.set_ylabel("GPUs", fontsize=8)
    top = max([v for s in series for v in s.values] + list(targets.values()) + [0.0])
    ax.set_ylim(0, max(1.0, top * 1.15))  # whole GPUs: an idle cluster is not a 0.05 scale
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", ncols=2)
    means = ", ".join(f"{s.label} {s.mean():.2f}" for s in series if s.points)
    goals = ", ".join(f"{a} {g:g}" for a, g in sorted(targets.items()))
    summary = (f"Mean GPUs allocated: {means or 'none recorded'}. "
               f"Targets (GPU-years for the year as GPUs on average): {goals or 'none'}.")
    return to_svg(fig), summary


def time_axis(series: Sequence[Series], now: float) -> tuple[float, float, str]:
    """(left edge, seconds per unit, unit) of an axis from the first point to now (0): in
    days over two days, hours over two hours, else minutes; a day back with no points."""
    first = min((s.points[0][0] for s in series if s.points), default=now - 86400)
    span = now - first
    div, unit = ((86400, "days") if span > 2 * 86400 else
                 (3600, "hours") if span > 2 * 3600 else (60, "minutes"))
    return min(-span / div, -1.0), div, unit
