"""A job on many nodes: plots collapse to quantile bands, tables to the busiest and
idlest nodes; a job on a few nodes keeps one line per node."""

from __future__ import annotations

from webapp.model import Series
from webapp.renderers.node_bands import MAX_LINES, bands, extremes


def _nodes(n: int) -> list[Series]:
    # Node k is busy k cores at every step; node 0 misses the last step.
    return [Series(f"node{k:04d}", tuple((60.0 * t, float(k)) for t in range(10 - (k == 0))))
            for k in range(n)]


def test_a_few_nodes_keep_their_own_lines():
    few = _nodes(MAX_LINES)
    assert bands(few) == few
    assert extremes(few) == (sorted(few, key=lambda s: -(s.mean() or 0)), 0)


def test_many_nodes_become_quantile_bands_over_the_nodes_at_each_time():
    many = bands(_nodes(1001))
    assert [s.label for s in many] == [
        "max of 1001 nodes", "90th percentile of 1001 nodes", "median of 1001 nodes",
        "10th percentile of 1001 nodes", "min of 1001 nodes"]
    top, p90, median, p10, low = ([v for _, v in s.points] for s in many)
    assert top == [1000.0] * 10
    assert median[0] == 500.0 and p90[0] == 900.0 and p10[0] == 100.0 and low[0] == 0.0
    assert low[9] == 1.0 and median[9] == 500.5  # node 0 has no sample there: 1,000 nodes


def test_tables_keep_the_ten_busiest_and_ten_idlest():
    shown, left_out = extremes(_nodes(1000))
    assert left_out == 980
    assert [s.label for s in shown[:2]] == ["node0999", "node0998"]
    assert [s.label for s in shown[-2:]] == ["node0001", "node0000"]
