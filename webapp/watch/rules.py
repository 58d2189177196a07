"""The rules `jobreport watch` applies to a running job: pure functions of a
``LiveSample`` and the thresholds, each returning an ``Alert`` or None.

They judge only what the trailing windows show, so a job is never blamed for data that
is missing (no series, or one covering less than ``coverage`` of the window). The
registry is the explicit ``RULES`` tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webapp.formatting import format_bytes, format_duration, format_percent
from webapp.model import AccountingJob, Series
from webapp.sources.live import LiveSample, Measured
from webapp.thresholds import Thresholds
from webapp.unused import idle_nodes


@dataclass(frozen=True)
class Alert:
    """One condition seen on one running job: what, the evidence table, what to do."""

    rule: str
    job: AccountingJob
    message: str
    advice: str
    evidence: tuple[tuple[str, str], ...]

    @property
    def cancel_command(self) -> str:
        return f"scancel {self.job.job_id}"


def _ran(s: LiveSample) -> float:
    start = s.job.start_time.timestamp() if s.job.start_time else s.now
    return s.now - start


def _covered(m: Measured, window: float, s: LiveSample, thresholds: Thresholds) -> bool:
    return m.samples * s.scrape_interval >= thresholds.coverage * window


def gpu_idle(s: LiveSample, thresholds: Thresholds) -> Alert | None:
    """Every allocated GPU below ``gpu_idle`` on average over the last ``gpu_idle_seconds``."""
    w = thresholds.gpu_idle_seconds
    gpus = [m for m in s.gpu_utilization if _covered(m, w, s, thresholds)]
    if not s.job.gpus or len(gpus) < s.job.gpus or _ran(s) < w:
        return None
    if any(m.value >= thresholds.gpu_idle for m in gpus):
        return None
    rows = tuple((f"GPU {m.label}: mean utilisation, last {format_duration(w)}",
                  format_percent(m.value)) for m in gpus)
    return Alert(
        "gpu_idle", s.job,
        f"None of the {s.job.gpus} GPU(s) of job {s.job.job_id} did any work in the last "
        f"{format_duration(w)} (utilisation below {format_percent(thresholds.gpu_idle)}).",
        "If the job does not need a GPU any more, cancel it and resubmit without "
        "--gres=gpu so others can use the GPU; if it should be using one, check that the "
        "program sees the device (CUDA_VISIBLE_DEVICES).",
        (("GPUs allocated", str(s.job.gpus)), *rows),
    )


def node_idle(s: LiveSample, thresholds: Thresholds) -> Alert | None:
    """A node of a multi-node job with (almost) no CPU use over ``node_idle_seconds``."""
    w = thresholds.node_idle_seconds
    if len(s.job.nodes) < 2 or _ran(s) < w:
        return None
    seen = [m for m in s.node_cores if _covered(m, w, s, thresholds)]
    idle = idle_nodes({m.label: m.value for m in seen}, thresholds.node_idle_cores)
    if not idle:
        return None
    rows = tuple((f"node {m.label}: cores busy, last {format_duration(w)}", f"{m.value:.2f}")
                 for m in seen)
    return Alert(
        "node_idle", s.job,
        f"{len(idle)} of the {len(s.job.nodes)} nodes of job {s.job.job_id} used no CPU in "
        f"the last {format_duration(w)}.",
        "Check that every node gets work (srun starts one task per node; MPI or torchrun "
        "must be told the node count); if fewer nodes suffice, ask for fewer with --nodes.",
        (("nodes allocated", str(len(s.job.nodes))), *rows),
    )


def fit_slope(series: Series) -> float | None:
    """Least-squares slope (units per second) of a series; None below two points."""
    fit = series.fit()
    return fit.slope if fit else None


def memory_growth(s: LiveSample, thresholds: Thresholds) -> Alert | None:
    """Memory growing at a rate that reaches the limit before the job's time limit."""
    job, limit = s.job, s.memory_limit_bytes
    if not limit or not job.time_limit_seconds or not job.start_time:
        return None
    end = job.start_time.timestamp() + job.time_limit_seconds
    rows, hits = [], []
    for series in s.memory_held:
        slope = fit_slope(series)
        if slope is None or len(series.points) < thresholds.memory_fit_min_points or slope <= 0:
            continue
        if slope * thresholds.memory_fit_seconds < thresholds.memory_fit_min_share * limit:
            continue
        now_bytes = series.points[-1][1]
        projected = now_bytes + slope * max(0.0, end - s.now)
        if projected < limit:
            continue
        hits.append(series.label)
        rows += [(f"node {series.label}: memory now", format_bytes(now_bytes)),
                 (f"node {series.label}: growth", f"{format_bytes(slope * 3600)} per hour"),
                 (f"node {series.label}: limit reached in",
                  format_duration(max(0.0, (limit - now_bytes) / slope)))]
    if not hits:
        return None
    return Alert(
        "memory_growth", job,
        f"At its current growth, job {job.job_id} will reach its memory limit "
        f"({format_bytes(limit)} per node) before its time limit ends, and be killed.",
        "If the growth is expected, resubmit with more memory (--mem); if not, look for a "
        "leak (data kept across iterations, growing lists or caches).",
        (("memory limit per node", format_bytes(limit)),
         ("time limit ends in", format_duration(max(0.0, end - s.now))), *rows),
    )


def time_limit_no_output(s: LiveSample, thresholds: Thresholds) -> Alert | None:
    """Near the time limit with no recent output: work is lost unless it checkpoints."""
    job = s.job
    if not job.time_limit_seconds or s.written_bytes is None:
        return None
    ran = _ran(s)
    if ran < thresholds.time_used * job.time_limit_seconds or ran < thresholds.output_seconds:
        return None
    if s.written_bytes >= thresholds.output_min_bytes:
        return None
    return Alert(
        "time_limit_no_output", job,
        f"Job {job.job_id} has used {format_percent(ran / job.time_limit_seconds)} of its "
        f"time limit and wrote {format_bytes(s.written_bytes)} in the last "
        f"{format_duration(thresholds.output_seconds)}: if it has no checkpoint, its work is lost "
        "when the limit is reached.",
        "Make the program save its state regularly (a checkpoint it can restart from), or "
        "ask for a longer --time next time.",
        (("time limit", format_duration(job.time_limit_seconds)),
         ("running for", format_duration(ran)),
         (f"written in the last {format_duration(thresholds.output_seconds)}",
          format_bytes(s.written_bytes))),
    )


def small_files_off_scratch(s: LiveSample, thresholds: Thresholds) -> Alert | None:
    """Many small writes right now, with nothing open on scratch."""
    calls, written = s.small_files_write_calls, s.small_files_write_bytes
    if not calls or written is None or s.scratch_in_use is None or s.scratch_in_use > 0:
        return None
    if (calls < thresholds.small_files_writes
            or written / calls >= thresholds.small_files_write_bytes):
        return None
    w = format_duration(thresholds.small_files_seconds)
    return Alert(
        "small_files_off_scratch", s.job,
        f"Job {s.job.job_id} made {calls:,.0f} small writes (on average "
        f"{format_bytes(written / calls)}) in the last {w}, outside the scratch file system.",
        "Write many small files to node-local or scratch storage (or into one archive), and "
        "copy the results back at the end; shared home and project file systems slow down "
        "for everybody under small-file load.",
        ((f"write calls, last {w}", f"{calls:,.0f}"),
         ("bytes per write", format_bytes(written / calls)),
         ("scratch in use", "no")),
    )


Rule = Callable[[LiveSample, Thresholds], Alert | None]
RULES: tuple[Rule, ...] = (
    gpu_idle, node_idle, memory_growth, time_limit_no_output, small_files_off_scratch,
)
RULE_NAMES: tuple[str, ...] = tuple(r.__name__ for r in RULES)


def evaluate(sample: LiveSample, thresholds: Thresholds) -> tuple[Alert, ...]:
    return tuple(a for rule in RULES if (a := rule(sample, thresholds)) is not None)
