"""Memory rising steadily through the job toward its limit: a probable leak.

Judged on a least-squares line through each node's series of what it held (anonymous +
shared memory, ``Usage.memory_held``: files piling up in /dev/shm fill the
limit as surely as a growing heap), not on two points: the line must explain most of the
variation (``memory_growth_fit``), add a good share of the limit over the run and still
rise in the last third, which a job that climbs to a high plateau (and simply needs more
memory) does not.
"""

from __future__ import annotations

from webapp.detectors.measures import long_enough, memory_limit
from webapp.formatting import format_bytes, format_duration, format_percent
from webapp.model import Finding, JobReport, LinearFit, Series, Severity
from webapp.states import OUT_OF_MEMORY
from webapp.thresholds import Thresholds


def growth(series: Series, limit: float, thresholds: Thresholds) -> LinearFit | None:
    """The series' fitted line when it is a steady climb worth a finding, else None."""
    if len(series.points) < thresholds.memory_growth_min_points:
        return None
    fit = series.fit()
    if fit is None or fit.slope <= 0 or fit.r2 < thresholds.memory_growth_fit:
        return None
    first, last = series.points[0][0], series.points[-1][0]
    if fit.slope * (last - first) < thresholds.memory_growth_min_share * limit:
        return None
    tail = Series(series.label, series.points[len(series.points) * 2 // 3:]).fit()
    if tail is None or tail.slope < thresholds.memory_growth_late * fit.slope:
        return None  # it levelled off: a plateau, not a leak
    return fit


class MemoryGrowthDetector:
    name = "memory_growth"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        limit = memory_limit(report)
        if not limit or not long_enough(report, thresholds.min_runtime_seconds):
            return ()
        held = report.usage.memory_held
        found = [(s, fit) for s in held if (fit := growth(s, limit, thresholds))]
        if not found:
            return ()
        series, fit = max(found, key=lambda sf: sf[1].slope)
        end = series.points[-1][0]
        now = fit.at(end)
        left = max(0.0, (limit - now) / fit.slope)
        # per hour, or per minute for a job shorter than an hour (as a user would say it)
        unit, span = ("hour", 3600) if (report.elapsed_seconds or 0) >= 3600 else ("minute", 60)
        rate = f"{format_bytes(fit.slope * span)} per {unit}"
        oom = report.state == OUT_OF_MEMORY or any(s.state == OUT_OF_MEMORY for s in report.steps)
        where = f" on {series.label}" if len(held) > 1 else ""
        if oom:
            outcome = "until the limit killed it"
        elif left <= 0:
            outcome = f"up to its {format_bytes(limit)} limit"
        else:
            outcome = (
                f"and would have reached the {format_bytes(limit)} limit "
                f"{format_duration(left)} after the job ended"
            )
        return (
            Finding(
                name=self.name,
                severity=Severity.CRITICAL if oom else Severity.WARNING,
                message=(
                    f"Resident memory{where} grew steadily by {rate} from start to end "
                    f"{outcome}: a probable memory leak, not a job that needs more memory."
                ),
                advice=(
                    "More `--mem` only delays the end. Look for what accumulates: lists or "
                    "caches that are appended to and never cleared, results kept for every "
                    "iteration, objects held by a global or by a history (e.g. a loss tensor "
                    "kept with its graph: store `loss.item()`). Run a short input under a "
                    "memory profiler (`tracemalloc`, `memray`, `valgrind --tool=massif`)."
                ),
                evidence={
                    "node": series.label,
                    "slope_bytes_per_second": round(fit.slope, 1),
                    "fit_r2": round(fit.r2, 4),
                    "points": fit.points,
                    "memory_at_end_bytes": round(now),
                    "memory_limit_bytes": int(limit),
                    "seconds_to_limit": round(left, 1),
                },
                evidence_text=(
                    f"RSS rose {rate} along a straight line (r² "
                    f"{fit.r2:.2f} over {fit.points} samples) to {format_bytes(now)}, "
                    f"{format_percent(now / limit)} of the {format_bytes(limit)} limit"
                    + ("." if oom or left <= 0
                       else f"; limit reached in {format_duration(left)} more.")
                ),
            ),
        )
