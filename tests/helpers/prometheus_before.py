"""A job's figures as the first report version asked for them: every one-number figure
over the job's whole window, one request each; per-core means evaluated by Prometheus;
range queries in pieces of 250 steps. What the current queries are checked against (a
stack test, and bench/bench_report.py on a 7-day job), and the benchmark's "before".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webapp.model import Series, Usage
from webapp.sources.prometheus import (
    LOOKBACK,
    PrometheusSource,
    choose_step,
    grid_start,
    job_selector,
    max_points,
    rate_window,
)
from webapp.sources.prometheus_answers import merge_series, parse_matrix, parse_scalar, parse_vector
from webapp.sources.prometheus_queries import RANGE_QUERIES, VECTOR_QUERIES, WINDOW_QUERIES

OLD_PIECE_STEPS = 250
# At a scrape after the end, over the time up to the end at most: the final sample may
# come after the job's (whole-second) end (the job did not run in between). Its value and
# time from the raw samples of an instant selector's look-back (there it would meet the
# series' stale marker).
OLD_PER_CORE = (
    "sum by ({node}, core) (last_over_time(jobs_cpu_core_seconds_total{{{sel}}}[{span}])"
    " / (clamp_max(max_over_time(timestamp(jobs_cpu_core_seconds_total{{{sel}}})[{span}:1s]),"
    " {end}) - {start}))"
)
SERIES = ("cpu_cores", "memory_rss", "gpu_utilization", "gpu_memory_used", "io_read_rate",
          "io_write_rate")


@dataclass(frozen=True)
class Before:
    scalars: dict[str, float | None]
    series: dict[str, tuple[Series, ...]]
    cpu_per_core: tuple[Series, ...]
    requests: int


def old_pieces(start: float, end: float, step: float) -> list[tuple[float, float]]:
    last = max(0, int((end - start) // step))
    return [
        (start + k * step, end if min(k + OLD_PIECE_STEPS - 1, last) == last
         else start + (k + OLD_PIECE_STEPS - 1) * step)
        for k in range(0, last + 1, OLD_PIECE_STEPS)
    ]


def figures_before(src: PrometheusSource, job_id: str, start: datetime, end: datetime,
                   nodes: tuple[str, ...], resolution: str = "plot") -> Before:
    """The old queries, one after another, through ``src``'s session and URL."""
    w0, w1 = start.timestamp(), max(end.timestamp(), start.timestamp() + 1)
    sel = job_selector(job_id, nodes, src.node_label)
    node = src.node_label or "instance"
    scrape = src.scrape_interval
    step = choose_step(w1 + scrape - w0, scrape, max_points(len(nodes), resolution))
    span = f"{int(w1 - w0 + 2 * scrape)}s"
    n = 0

    def get(path: str, params: dict[str, Any]) -> Any:
        nonlocal n
        n += 1
        return src.session.get(f"{src.url}{path}", params=params, timeout=60).json()

    series = {}
    for name in SERIES:
        template, label = RANGE_QUERIES[name]
        query = template.format(sel=sel, rate=rate_window(step, scrape), node=node)
        parts = [
            parse_matrix(get("/api/v1/query_range",
                             {"query": query, "start": a, "end": b, "step": step}),
                         label.format(node=node))
            # at today's instants (the step's multiples), so the series compare point by point
            for a, b in old_pieces(grid_start(w0, step), w1 + scrape, step)
        ]
        series[name] = merge_series(parts)
    per_core = [Series(s.label, tuple((w1, v) for _, v in s.points)) for s in parse_vector(
        get("/api/v1/query", {"query": OLD_PER_CORE.format(sel=sel, start=int(w0), end=w1,
                                                            span=LOOKBACK, node=node),
                              "time": w1 + scrape}),
        f"{node}/core",
    )] or parse_vector(  # when that finds nothing, the rate over the whole job
        get("/api/v1/query", {"query": VECTOR_QUERIES["cpu_per_core"][1].format(
            sel=sel, window=span, node=node), "time": w1 + scrape}),
        f"{node}/core",
    )
    scalars = {
        name: parse_scalar(get("/api/v1/query", {"query": q.format(sel=sel, window=span),
                                                  "time": w1 + scrape}))
        for name, q in WINDOW_QUERIES.items()
    }
    return Before(scalars, series, tuple(per_core), n)


def scalars_of(usage: Usage) -> dict[str, float | None]:
    """The one-number figures of ``usage`` by their WINDOW_QUERIES names."""
    out = {name: getattr(usage, name) for name in WINDOW_QUERIES}
    out["scratch_in_use"] = None if usage.scratch_in_use is None else float(usage.scratch_in_use)
    return out


def close(a: float | None, b: float | None, rel: float = 0.01) -> bool:
    """Equal within ``rel`` (a value may also be None on both sides)."""
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9)


def differences(before: Before, usage: Usage, rel: float = 0.01) -> list[str]:
    """Every figure of ``usage`` that differs from ``before`` by more than ``rel``."""
    out = []
    scalars = scalars_of(usage)
    if before.scalars["scratch_in_use"] is not None:
        before.scalars["scratch_in_use"] = float(before.scalars["scratch_in_use"] > 0)
    for name, old in before.scalars.items():
        if not close(old, scalars[name], rel):
            out.append(f"{name}: before {old}, now {scalars[name]}")
    pairs = [(name, before.series[name], getattr(usage, name)) for name in SERIES]
    pairs.append(("cpu_per_core", before.cpu_per_core, usage.cpu_per_core))
    for name, old, new in pairs:
        if [s.label for s in old] != [s.label for s in new]:
            out.append(f"{name}: labels {[s.label for s in old]} now {[s.label for s in new]}")
            continue
        for o, s in zip(old, new, strict=True):
            if [t for t, _ in o.points] != [t for t, _ in s.points] or not all(
                close(a, b, rel) for (_, a), (_, b) in zip(o.points, s.points, strict=True)
            ):
                out.append(f"{name} {o.label}: points differ")
    return out

