"""The job's memory peak: one definition per source, chosen once per report.

``--mem`` is per node, so the peak is that of the busiest node.

- Prometheus: the most memory the job's cgroup held on each node that the kernel cannot
  reclaim: anonymous memory (``jobs_memory_rss_bytes``, all the job's tasks on that node
  together) plus shared memory (``jobs_memory_shmem_bytes``: files in /dev/shm or another
  tmpfs, shared anonymous mappings), summed sample by sample (``Usage.memory_held``). The page
  cache is left out: the kernel drops it before it kills anything, so a cache near the
  limit is no risk. Shared memory is page cache too, but it has no file to be written
  back to; only swap could take it, and compute nodes seldom have swap. The busiest
  node's value.
- sacct: MaxRSS is the largest *single task*; a step running N tasks on that node may
  have held up to N times that at once (seff's "estimated maximum"). So the estimate is
  MaxRSS x the step's tasks per node, for the step whose estimate is largest; without
  step lines (old Slurm), the allocation line's MaxRSS. What MaxRSS counts depends on
  the cgroup version (``jobacct_gather/cgroup``): on v1 the task's anonymous memory
  (total_rss: a GiB written to /dev/shm reads as a MaxRSS of about 1 MiB), on v2 all its
  memory.current, shared memory and page cache included.

Prometheus wins when it has samples, unless a single task's MaxRSS alone exceeds them
(the peak fell between two scrapes): then sacct's estimate is the better account. Not on
cgroup v2, where MaxRSS counts the page cache: there it may exceed what the job held by
its cache alone (a job that read 440 MiB of files under a 500M limit on v24: MaxRSS
455 MiB, 0.6 MiB held), and Prometheus' samples of what it held stand.

Samples of the job's exit are not its memory: a scrape that lands while its processes
exit (or after its last task ended, the cgroup still there) reads the few MiB left, and
that one point would end a leak's straight line (``while_running``).

``node_memory`` lays the parts side by side per node (anonymous, shared, page cache,
MaxRSS), each its own largest sample; the report's details show them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from webapp.model import MemoryPeak, NodeMemory, PeakSource, SacctJob, Series, Step, Usage

# A final sample under this share of the one before it, taken in the job's last steps:
# its processes were exiting, not shrinking (no job frees half its memory in one scrape
# and goes on working).
EXIT_DROP = 0.5


def tasks_per_node(step: Step) -> int:
    """The step's tasks on one node (rounded up): what one task's MaxRSS is multiplied by."""
    return math.ceil((step.tasks or 1) / max(1, len(step.nodes)))


def step_peak(step: Step) -> int | None:
    """One step's (or het component's) peak: MaxRSS x its tasks per node."""
    return step.max_rss_bytes * tasks_per_node(step) if step.max_rss_bytes else None


def sacct_peak(job: SacctJob, parts: tuple[Step, ...] = ()) -> MemoryPeak | None:
    """MaxRSS x tasks on the node of the largest task, over the steps (and ``parts``, a
    whole het job's component lines); None without MaxRSS."""
    best: MemoryPeak | None = None
    for step in (*job.steps, *parts):
        peak_bytes = step_peak(step)
        if not peak_bytes:
            continue
        tasks = tasks_per_node(step)
        peak = MemoryPeak(
            bytes=peak_bytes,
            source=PeakSource.SACCT,
            node=step.max_rss_node or (step.nodes[0] if len(step.nodes) == 1 else None),
            step_id=step.step_id,
            per_task_bytes=step.max_rss_bytes,
            tasks=tasks,
        )
        if best is None or peak.bytes > best.bytes:
            best = peak
    if best is None and not job.steps and job.alloc_max_rss_bytes:
        best = MemoryPeak(job.alloc_max_rss_bytes, PeakSource.SACCT,
                          per_task_bytes=job.alloc_max_rss_bytes, tasks=1)
    return best


def _by_time(series: Series) -> dict[float, float]:
    return dict(series.points)


def page_cache_series(usage: Usage) -> tuple[Series, ...]:
    """Per node, the page cache without its shared memory: what the kernel can reclaim."""
    shmem = {s.label: _by_time(s) for s in usage.memory_shmem}
    return tuple(Series(c.label, tuple((t, max(0.0, v - shmem.get(c.label, {}).get(t, 0.0)))
                                       for t, v in c.points))
                 for c in usage.memory_cache)


def prometheus_peak(usage: Usage) -> MemoryPeak | None:
    """The largest held sample of the busiest node; None when nothing was sampled."""
    best: MemoryPeak | None = None
    for series in usage.memory_held:
        top = series.max()
        if top and (best is None or top > best.bytes):
            best = MemoryPeak(int(top), PeakSource.PROMETHEUS, node=series.label or None)
    return best


def _top(series: tuple[Series, ...]) -> dict[str, int]:
    return {s.label: int(top) for s in series if (top := s.max()) is not None}


def _max_rss_by_node(job: SacctJob | None, parts: tuple[Step, ...] = ()) -> dict[str, int]:
    """The largest task's MaxRSS on each node sacct names (MaxRSSNode, or a one-node
    step's node), over the steps and a whole het job's component lines."""
    out: dict[str, int] = {}
    for step in (*(job.steps if job else ()), *parts):
        node = _node_of(step)
        if node and step.max_rss_bytes is not None:
            out[node] = max(out.get(node, 0), step.max_rss_bytes)
    return out


def _node_of(step: Step) -> str | None:
    """Where a step's largest task ran: MaxRSSNode, or a one-node step's node."""
    return step.max_rss_node or (step.nodes[0] if len(step.nodes) == 1 else None)


def node_peaks(usage: Usage, job: SacctJob | None, parts: tuple[Step, ...] = (),
               peak: MemoryPeak | None = None, requests: Mapping[str, int] | None = None
               ) -> dict[str, int]:
    """Each node's own peak by the job peak's rule (``job_peak`` on that node's figures:
    what Prometheus saw it hold, unless one task's MaxRSS there is larger; sacct's
    estimate, MaxRSS x tasks per node, where Prometheus has nothing), with the job's own
    peak on the node that held it: where sacct does not say which (a step over several
    nodes without MaxRSSNode), on the busiest node, else on the one that asked for most.
    ``parts``: a whole het job's component lines."""
    held = _top(usage.memory_held)
    estimate: dict[str, MemoryPeak] = {}
    unsure: set[str] = set()  # nodes of a several-node step that sacct's MaxRSS is not of
    steps = (*(job.steps if job else ()), *parts)
    for step in steps:
        node, top = _node_of(step), step_peak(step)
        unsure.update(n for n in step.nodes if n != node)
        if node and top and (node not in estimate or top > estimate[node].bytes):
            estimate[node] = MemoryPeak(top, PeakSource.SACCT, node, step.step_id,
                                        step.max_rss_bytes, tasks_per_node(step))
    out: dict[str, int] = {}
    # sacct's estimate of a node it only partly saw is no peak of it: unknown there
    for node in {*held, *(n for n in estimate if n not in unsure)}:
        prom = MemoryPeak(held[node], PeakSource.PROMETHEUS, node) if node in held else None
        if (mine := job_peak(estimate.get(node), prom, usage)) is not None:
            out[node] = mine.bytes
    if peak is not None:
        at = peak.node or max(out, key=lambda n: (out[n], n), default=None) or max(
            requests or {}, key=lambda n: ((requests or {})[n], n), default=None)
        if at:
            out[at] = peak.bytes
    return out


def node_memory(usage: Usage, job: SacctJob | None, requests: Mapping[str, int] | None = None,
                parts: tuple[Step, ...] = (), peak: MemoryPeak | None = None
                ) -> tuple[NodeMemory, ...]:
    """Each node's anonymous, shared and page cache peaks (Prometheus) beside the largest
    task's MaxRSS (sacct), its own request (``requests``) and its own peak (``node_peaks``),
    sorted by node; () when nothing is known of any node."""
    requests = requests or {}
    held, anon = _top(usage.memory_held), _top(usage.memory_rss)
    shmem, cache = _top(usage.memory_shmem), _top(page_cache_series(usage))
    max_rss = _max_rss_by_node(job, parts)
    peaks = node_peaks(usage, job, parts, peak, requests)
    nodes = sorted({*held, *shmem, *cache, *max_rss, *peaks, *requests})
    return tuple(NodeMemory(n, held.get(n), anon.get(n), shmem.get(n), cache.get(n),
                            max_rss.get(n), requests.get(n), peaks.get(n)) for n in nodes)


def maxrss_counts_page_cache(usage: Usage) -> bool:
    """The job ran on cgroup v2 nodes (no per-core CPU series: the exporter has them on v1
    only) whose page cache Prometheus sampled: there Slurm's cgroup plugin reads MaxRSS
    from memory.current, page cache included, so a MaxRSS above what the job held may be
    only its page cache. Both the report's and the bulk source's usage carry the two."""
    return bool(usage.memory_cache) and not usage.cpu_per_core


def job_peak(sacct: MemoryPeak | None, prometheus: MemoryPeak | None,
             usage: Usage | None = None) -> MemoryPeak | None:
    """Prometheus' peak, unless one task's MaxRSS alone is larger (a peak between
    scrapes); never where MaxRSS counts the page cache (``maxrss_counts_page_cache``)."""
    if prometheus is None:
        return sacct
    if usage is not None and maxrss_counts_page_cache(usage):
        return prometheus
    if sacct is not None and (sacct.per_task_bytes or 0) > prometheus.bytes:
        return sacct
    return prometheus


def exit_tail_start(series: Series, end: float, step: float) -> int:
    """Index of the first sample of the series' exit tail (``len`` when none): the first
    sample from ``end - 2 x step`` on after which every sample is under ``EXIT_DROP`` of
    the one before it."""
    points = series.points
    first = next((i for i, (t, _) in enumerate(points) if t >= end - 2 * step), len(points))
    for j in range(max(first, 1), len(points)):
        before = points[j - 1][1]
        if all(v < EXIT_DROP * before for _, v in points[j:]):
            return j
    return len(points)


def while_running(usage: Usage, end: float | None) -> Usage:
    """``usage`` with each node's memory series (anonymous, shared, cache) cut before the
    exit tail of what it held; as is while the job runs (``end`` None) or without the
    series' step."""
    if end is None or not usage.step_seconds or not usage.memory_rss:
        return usage
    step = usage.step_seconds
    tails = {s.label: s.points[i][0] for s in usage.memory_held
             if (i := exit_tail_start(s, end, step)) < len(s.points)}
    if not tails:
        return usage

    def cut(series: tuple[Series, ...]) -> tuple[Series, ...]:
        return tuple(Series(s.label, tuple(p for p in s.points if p[0] < tails[s.label]))
                     if s.label in tails else s for s in series)

    return replace(usage, memory_rss=cut(usage.memory_rss),
                   memory_shmem=cut(usage.memory_shmem), memory_cache=cut(usage.memory_cache))
