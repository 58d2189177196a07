"""Metric families that always carry the ``cluster`` label first."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample


def gauge(name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=["cluster", *labels])


def counter(name: str, doc: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=["cluster", *labels])


def add(family: Metric, labels: dict[str, str], value: float) -> None:
    """``family.add_metric`` for a label dict built once and shared by several families
    (a node's labels serve its dozen per-node families)."""
    family.samples.append(Sample(family.name, labels, value))
