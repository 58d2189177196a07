"""Counters that went back to 0 during a job, and what they had counted before.

jobs-exporter adds up some of a job's figures itself (its joules, its exited processes'
I/O, its threads' waits: ``SUMMED_METRICS``) and keeps them across its restart in a
state file (its README, "Restarts and upgrades"). An exporter run without one, or one older than it,
starts them at 0 again, and a figure read from the job's last samples would hold only
what was counted after the restart. So the report asks, in a request it sends anyway,
how often each node's summed counters went down over the job (``RESETS_QUERY``: cheap,
the counters' own samples). Where one did (rare), it asks for those counters' samples
(``SAMPLES_QUERY``) and adds back, per series, each value just before a drop, as
Prometheus' ``increase()`` does without its extrapolation: at most what the exporter
counted between its last scrape and its stop is missing. The report names the nodes
whose figures rest on such an addition (``Usage.counter_resets``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from webapp.sources.prometheus_queries import TAIL_FIGURES, own_matchers

SUMMED_METRICS = (
    "jobs_energy_joules_total",
    "jobs_read_bytes_total",
    "jobs_write_bytes_total",
    "jobs_read_syscalls_total",
    "jobs_write_syscalls_total",
    "jobs_cpu_wait_seconds_total",
    "jobs_io_wait_seconds_total",
)
_NAMES = "|".join(SUMMED_METRICS)
# Per node: how many times one of its summed counters went down ({span}: the window).
# resets() drops the metric's name, so each metric's answer is named again before the
# union (two metrics' series of one job and node would have the same labels); by its
# name less ``jobs_``: a label value, never to be taken for a series without selector.
RESETS_QUERY = "sum by ({{node}}) ({})".format(" or ".join(
    f'label_replace(resets({m}{{{{{{sel}}}}}}[{{span}}]), "counter", '
    f'"{m.removeprefix("jobs_")}", "", "")' for m in SUMMED_METRICS))
# The summed counters' stored samples over the window (their metric names kept).
SAMPLES_QUERY = f'{{{{__name__=~"{_NAMES}",{{sel}}}}}}[{{span}}]'
# The tail figures that read a summed counter: those a reset takes from.
SUMMED_FIGURES = tuple(name for name, (_, metric) in TAIL_FIGURES.items()
                       if own_matchers(metric)[0] in SUMMED_METRICS)
_MATCHER = re.compile(r'(\w+)="([^"]*)"')


def reset_nodes(answer: Iterable[tuple[Mapping[str, str], float]], node: str
                ) -> tuple[str, ...]:
    """The nodes whose summed counters went down, from RESETS_QUERY's answer."""
    return tuple(sorted({labels.get(node, "") for labels, count in answer if count > 0}))


def lost(values: list[float]) -> float:
    """What a counter counted before its resets: each value just before a drop.

        [5, 9, 2, 4, 1] -> 9 + 4 = 13 (the total counted is 13 + 1 = 14)
    """
    return sum(a for a, b in zip(values, values[1:], strict=False) if b < a)


def losses(result: list[dict[str, Any]]) -> list[tuple[dict[str, str], float]]:
    """(labels with ``__name__``, lost value) of each series of SAMPLES_QUERY's matrix."""
    out = []
    for item in result:
        values = [float(v) for _, v in item.get("values", ())]
        amount = lost(values)
        if amount > 0:
            out.append((dict(item.get("metric", {})), amount))
    return out


def _matches(labels: Mapping[str, str], metric: str) -> bool:
    name, extra = own_matchers(metric)
    return labels.get("__name__") == name and all(
        labels.get(k) == v for k, v in _MATCHER.findall(extra))


def added_back(lost_series: list[tuple[dict[str, str], float]], node: str,
               scalars: Mapping[str, float | None],
               by_node: tuple[tuple[str, float], ...],
               per_gpu: tuple[tuple[str, float], ...]
               ) -> tuple[dict[str, float | None], tuple[tuple[str, float], ...],
                          tuple[tuple[str, float], ...]]:
    """The summed figures, the energy by node and the energy by GPU with what the
    counters lost at their resets added back."""
    figures = dict(scalars)
    for name in SUMMED_FIGURES:
        metric = TAIL_FIGURES[name][1]
        extra = sum(v for labels, v in lost_series if _matches(labels, metric))
        if extra:
            figures[name] = (figures.get(name) or 0.0) + extra
    energy = [(labels, v) for labels, v in lost_series
              if labels.get("__name__") == "jobs_energy_joules_total"]
    nodes = dict(by_node)
    for labels, v in energy:
        key = labels.get(node, "")
        nodes[key] = nodes.get(key, 0.0) + v
    gpus = dict(per_gpu)
    for labels, v in energy:
        if labels.get("source") == "gpu":
            key = f"{labels.get(node, '?')}/{labels.get('gpu', '?')}"
            gpus[key] = gpus.get(key, 0.0) + v
    return figures, tuple(sorted(nodes.items())), tuple(sorted(gpus.items()))
