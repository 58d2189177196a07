"""A summed counter that went back to 0 during the job (its exporter restarted without its
saved state): the figures add back what it held before, on literal numbers and through a
real Prometheus; and a job without a reset is read as before."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.helpers.mail import free_port
from tests.helpers.prometheus_server import backfill, start_prometheus, stop
from webapp.settings import Settings
from webapp.sources.counter_resets import SUMMED_FIGURES, losses, lost
from webapp.sources.from_settings import prometheus_from

SCRAPE = 5
NODES = ("cpu2", "cpu3")


def test_lost_is_each_value_before_a_drop():
    assert lost([5, 9, 2, 4, 1]) == 13
    assert lost([1, 2, 3]) == 0
    assert lost([]) == 0
    matrix = [{"metric": {"__name__": "jobs_read_bytes_total"}, "values": [[0, "7"], [5, "1"]]},
              {"metric": {"__name__": "jobs_write_bytes_total"}, "values": [[0, "1"], [5, "2"]]}]
    assert losses(matrix) == [({"__name__": "jobs_read_bytes_total"}, 7.0)]


def test_every_summed_figure_is_one_the_exporter_sums():
    assert set(SUMMED_FIGURES) == {
        "read_bytes", "write_bytes", "read_syscalls", "write_syscalls", "cpu_wait_seconds",
        "io_wait_seconds", "energy_joules", "energy_gpu_joules", "energy_other_joules"}


def _counter(t0: float, restart: bool) -> list[tuple[float, float]]:
    """50 a scrape for 24 scrapes; ``restart``: the 13th scrape missed and the counter
    from 0 again after it (what the exporter counted meanwhile lost, as for a real one)."""
    if not restart:
        return [(t0 + SCRAPE * i, 50.0 * (i + 1)) for i in range(24)]
    before = [(t0 + SCRAPE * i, 50.0 * (i + 1)) for i in range(12)]
    after = [(t0 + SCRAPE * (13 + k), 50.0 * (k + 1)) for k in range(11)]
    return before + after


@pytest.fixture(scope="module")
def prom(tmp_path_factory) -> Iterator[tuple[str, float]]:
    tmp = tmp_path_factory.mktemp("resets")
    t0 = float((int(time.time()) - 3600) // 60 * 60)
    lines = []
    for metric, extra in (("jobs_energy_joules_total", {"source": "cpu"}),
                          ("jobs_read_bytes_total", {}),
                          ("jobs_cpu_wait_seconds_total", {}),
                          ("jobs_cpu_seconds_total", {"mode": "user"})):
        lines.append(f"# TYPE {metric.removesuffix('_total')} counter")
        for node in NODES:
            labels = {"jobid": "77", "instance": f"{node}:9306", "node": node, **extra}
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            restart = node == "cpu3" and metric != "jobs_cpu_seconds_total"
            lines += [f"{metric}{{{text}}} {v} {t:.3f}" for t, v in _counter(t0, restart)]
    (tmp / "resets.om").write_text("\n".join(lines) + "\n# EOF\n")
    backfill(tmp / "resets.om", tmp / "data")
    port = free_port()
    proc = start_prometheus(tmp, tmp / "data", port=port)
    try:
        yield f"http://127.0.0.1:{port}", t0
    finally:
        stop(proc)


def test_a_reset_is_added_back_and_named(prom):
    url, t0 = prom
    source = prometheus_from(Settings.from_env({
        "JOBREPORT_CONFIG": "", "JOBREPORT_PROMETHEUS_URL": url,
        "JOBREPORT_SCRAPE_INTERVAL": str(SCRAPE), "JOBREPORT_PROMETHEUS_NODE_LABEL": "node"}))
    start = datetime.fromtimestamp(t0 - SCRAPE, UTC)
    end = datetime.fromtimestamp(t0 + SCRAPE * 23, UTC)
    u = source.usage("77", start, end, NODES)
    # cpu2 counted 1,200 undisturbed; cpu3 600 before its restart and 550 after it
    # (the scrape it missed is what a real restart without state loses)
    assert u.counter_resets == ("cpu3",)
    assert u.energy_joules == pytest.approx(1200 + 1150)
    assert dict(u.energy_by_node) == pytest.approx({"cpu2": 1200, "cpu3": 1150})
    assert u.read_bytes == pytest.approx(2350)
    assert u.cpu_wait_seconds == pytest.approx(2350)
    assert any("a reset" in name for name, _ in u.queries)


def test_the_note_names_the_node_and_survives_the_archive():
    from dataclasses import replace

    from tests.helpers.reports import sample_report
    from webapp.json_codec import decode, encode
    from webapp.report.build import reset_note

    note = reset_note(("cpu3",))
    assert "cpu3" in note and "restarted" in note
    report = sample_report()
    report = replace(report, usage=replace(report.usage, counter_resets=("cpu3",)),
                     notes=(note,))
    back = decode(encode(report))
    assert back.usage.counter_resets == ("cpu3",) and note in back.notes
