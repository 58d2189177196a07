"""The staff report's GPU and node faults: per card, the XIDs (the program's own left out)
and memory errors with the jobs that held it; per node, its down or drain with the reason;
a source that cannot answer is said, not silently empty."""

from __future__ import annotations

from datetime import UTC, datetime

from webapp.model import NodeEvent, SourceUnavailable
from webapp.staff.hardware import fault_queries, hardware_table

SINCE, UNTIL = 1_795_000_000.0, 1_795_604_800.0


class Recorded:
    """Prometheus answering each fault query with what a node with faults would."""

    def __init__(self, down: bool = False) -> None:
        self.down, self.asked = down, []

    def vector(self, query: str, time: float | None = None):
        self.asked.append((query, time))
        if self.down:
            raise SourceUnavailable("prometheus", "cannot reach http://prom:9090")
        if query.startswith("sum by (instance, gpu, xid)"):
            return [({"instance": "gpu2", "gpu": "0", "xid": "79"}, 2.0),
                    ({"instance": "gpu2", "gpu": "0", "xid": "13"}, 5.0)]
        if query.startswith("count by (instance, gpu, xid)"):
            return [({"instance": "gpu2", "gpu": "0", "xid": "79"}, 1.0)]
        if query.startswith("sum by (instance, gpu, type)"):
            return [({"instance": "gpu4", "gpu": "0/9", "type": "uncorrected"}, 3.0)]
        return [({"instance": "gpu4", "gpu": "0/9", "type": "uncorrected"}, 2.0)]


class Events:
    def node_events(self, nodes, start, end):
        assert nodes is None and start.timestamp() == SINCE
        return (NodeEvent("cpu2", datetime(2026, 11, 25, 9, 30, tzinfo=UTC), None,
                          "IDLE+DRAIN", "Kill task failed"),
                NodeEvent("cpu3", datetime(2026, 11, 26, 9, 0, tzinfo=UTC), None, "IDLE", ""))


def test_faults_per_card_and_node_events_with_their_reason():
    prom = Recorded()
    t = hardware_table(prom, Events(), "instance", SINCE, UNTIL, 'cluster="v24"')
    assert [r.cells for r in t.rows] == [
        ("gpu2/0", "XID 79 (GPU has fallen off the bus)", "2", "1"),
        ("gpu4/0/9", "uncorrected memory errors", "3", "2"),
        ("cpu2", "set IDLE+DRAIN at 2026-11-25 09:30 UTC", "Kill task failed", ""),
    ]
    assert all('{cluster="v24"}[604800s]' in q and at == UNTIL for q, at in prom.asked)


def test_a_source_down_is_said_and_the_rest_stands():
    t = hardware_table(Recorded(down=True), Events(), "instance", SINCE, UNTIL)
    assert [r.values.get("node") for r in t.rows] == ["cpu2"]
    assert "GPU faults unavailable: cannot reach http://prom:9090." in t.why
    assert set(fault_queries("instance", 60)) == {"xid", "xid_jobs", "ecc", "ecc_jobs"}
