"""The idle-node finding: one node of a multi-node job that did nothing, decided by the same
cut (``webapp.unused.idle_nodes``) as the watch's rule and the staff report's table."""

from __future__ import annotations

from dataclasses import replace

from tests.helpers.reports import _series, sample_report
from webapp.detectors.node_idle import NodeIdleDetector
from webapp.thresholds import Thresholds
from webapp.unused import idle_nodes

T = Thresholds()


def two_node_report(node02_cores: float | None, nodes=("node01", "node02")):
    """A two-node job: node01 busy, node02 at ``node02_cores`` (None: no samples)."""
    busy = _series("node01", 60, lambda i: 1.5)
    cores = (busy,) if node02_cores is None else (busy, _series("node02", 60,
                                                                lambda i: node02_cores))
    base = sample_report()
    return replace(base, nodes=nodes, usage=replace(base.usage, cpu_cores=cores))


def test_a_node_that_did_nothing_is_named_with_its_figure():
    (f,) = NodeIdleDetector().detect(two_node_report(0.0), T)
    assert f.name == "node_idle" and "1 of the job's 2 nodes did nothing" in f.message
    assert "(node02: 0.00 cores busy on average), yet the job held it whole" in f.message
    assert "node01" not in f.message
    assert f.evidence["idle_nodes"] == "node02" and f.evidence["cores_busy_node01"] == 1.5


def test_a_node_that_worked_a_little_is_not_idle():
    assert NodeIdleDetector().detect(two_node_report(0.2), T) == ()


def test_a_node_without_samples_is_unknown_not_idle():
    assert NodeIdleDetector().detect(two_node_report(None), T) == ()


def test_a_single_node_job_gets_none():
    one = two_node_report(0.0, nodes=("node01",))
    assert NodeIdleDetector().detect(replace(one, usage=replace(
        one.usage, cpu_cores=one.usage.cpu_cores[1:])), T) == ()


def test_the_cut_is_the_threshold_and_strict():
    assert idle_nodes({"a": 0.0, "b": 0.01, "c": 0.009}, 0.01) == ("a", "c")
    assert idle_nodes({"b": 2.0, "a": 0.0}, T.node_idle_cores) == ("a",)
