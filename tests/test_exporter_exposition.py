"""The exporter's text writer (``jobs_exporter.exposition``) against prometheus_client's
``generate_latest``: the same bytes for scrapes of every captured tree, for label values
that need escaping, numbers Go writes its own way, and families it hands to the library."""

from __future__ import annotations

import pathlib

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from jobs_exporter.exposition import TextWriter
from jobs_exporter.registry import JobsCollector
from tests.helpers.exporter_scrape import FIXTURES, USERS, make_settings

TREES = sorted(p.name for p in FIXTURES.iterdir() if (p / "cgroup").is_dir())


@pytest.mark.parametrize("tree", TREES)
def test_a_captured_trees_scrape_is_written_as_the_library_writes_it(tree):
    registry = CollectorRegistry()
    root = FIXTURES / tree
    collector = JobsCollector(make_settings(root, node_name=_node(root)),
                              user_name=USERS.__getitem__)
    registry.register(collector)
    writer = TextWriter()
    ours = writer.write(registry)  # a scrape each: the timings differ, the rest not
    families = list(registry.collect())
    frozen = _Frozen(families)
    assert b"jobs_info{" in ours
    assert writer.write(frozen) == generate_latest(frozen)  # type: ignore[arg-type]
    assert writer.write(frozen) == generate_latest(frozen)  # type: ignore[arg-type]  # cached
    collector.close()


def _node(root: pathlib.Path) -> str:
    """The node name the tree was captured on (its v1 slurm_<node> or v2 <node>_ scope)."""
    for path in (root / "cgroup").glob("*/slurm_*"):
        return path.name[len("slurm_"):]
    for path in (root / "cgroup" / "system.slice").glob("*_slurmstepd.scope"):
        return path.name.split("_slurmstepd")[0]
    return "vm"


class _Frozen:
    """Families as they are, collected again as often as asked."""

    def __init__(self, families):
        self.families = families

    def collect(self):
        return iter(self.families)


def test_values_needing_escapes_odd_numbers_and_the_librarys_own_families():
    registry = CollectorRegistry()
    hostile = GaugeMetricFamily("jobs_hostile", 'Help with \\ and\nnewline "quoted".',
                                labels=["user", "path"])
    hostile.add_metric(['a"b', "c\\d\ne"], 1)
    hostile.add_metric(["plain", "/scratch/x y"], float("inf"))
    hostile.add_metric(["n", "m"], float("-inf"))
    hostile.add_metric(["nan", "v"], float("nan"))
    numbers = CounterMetricFamily("jobs_numbers_bytes", "Odd numbers.", labels=["k"])
    for i, v in enumerate((0, 1, -3, 1.5e-9, 123456789.0, 1e22, -123456789.5, 2**63, 7)):
        numbers.add_metric([str(i)], v)
    unlabelled = GaugeMetricFamily("jobs_unlabelled", "No labels.", value=3)
    # names the library escapes (0.22 and later): its writer's
    dotted = GaugeMetricFamily("jobs.dotted", "A dotted name.", labels=["la-bel"])
    dotted.add_metric(["x"], 2)
    registry.register(_Frozen((hostile, numbers, unlabelled, dotted)))  # type: ignore[arg-type]
    # The library's own metrics: a counter with its _created sample, a histogram.
    Counter("jobs_lib_total", "Counter.", ["jobid"], registry=registry).labels("1").inc(2)
    Gauge("jobs_lib_gauge", "Gauge.", registry=registry).set(0.25)
    Histogram("jobs_lib_seconds", "Histogram.", registry=registry).observe(0.3)
    ours = TextWriter().write(registry)
    assert ours == generate_latest(registry)
    assert b'jobs_hostile{path="c\\\\d\\ne",user="a\\"b"} 1.0\n' in ours
    assert b'jobs_numbers_bytes_total{k="5"} 1e+22\n' in ours
    assert ours.count(b"# TYPE ") == 9  # each _created its own gauge, as the library writes it
