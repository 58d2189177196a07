"""The powercap replay: a real machine's recorded RAPL series served as the zone files'
energy_uj over time, read by the exporter through the same sysfs code as the hardware's."""

from __future__ import annotations

import shutil

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from jobs_exporter import energy, powercap
from jobs_exporter.__main__ import main
from jobs_exporter.collectors.energy import EnergyCollector
from jobs_exporter.powercap_replay import PowercapReplay, Recording, parse_rapl_trace
from jobs_exporter.registry import JobsCollector
from tests.helpers.exporter_scrape import FIXTURES, make_settings, value

ENERGY = FIXTURES / "energy"
TRACE = ENERGY / "rapl/icpe2024_broadwell-ep_compute_bdbda7c9_perf_first-second.txt"
PACKAGE_UJ = 240422366267  # the captured tree's intel-rapl:0/energy_uj
MAX_RANGE_UJ = 262143328850


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def series():
    return parse_rapl_trace(TRACE.read_text())


def test_parse_the_recorded_trace(series):
    # Two sockets, package and DRAM each, 5 ms apart for the first second of the run.
    assert sorted(series) == [(0, "dram"), (0, "package"), (1, "dram"), (1, "package")]
    assert all(len(points) == 192 for points in series.values())
    assert series[(0, "package")][0] == (0.005173, 0.1097)
    assert series[(1, "dram")][-1] == (1.000669, 0.0054)
    assert parse_rapl_trace("0.1,0.1,N2,pp0,1.0,10.0\n") == {}  # not a zone the exporter reads
    with pytest.raises(ValueError, match="line 1"):
        parse_rapl_trace("0.1,0.1,package,1.0\n")
    with pytest.raises(ValueError, match="time goes back"):
        parse_rapl_trace("0.2,0.1,N0,package,1.0,10\n0.1,0.1,N0,package,1.0,10\n")


def test_recording_counts_the_recorded_joules_and_loops(series):
    rec = Recording(series[(0, "package")])
    total = sum(j for _, j in series[(0, "package")])
    assert rec.joules(0) == 0
    assert rec.joules(rec.period) == pytest.approx(total)
    assert rec.joules(0.005173) == pytest.approx(0.1097)  # the first interval, whole
    assert rec.joules(2.5 * rec.period) == pytest.approx(2 * total + rec.joules(0.5 * rec.period))
    # Socket 0's package under the compute load: ~37 W once it ramped up from ~21 W.
    assert 30 < rec.mean_watts < 40
    assert rec.joules(100.0) == pytest.approx(rec.mean_watts * 100.0, rel=0.01)


def test_replay_serves_the_counter_through_the_sysfs_reader(tmp_path, series):
    clock = Clock()
    replay = PowercapReplay(str(ENERGY / "powercap"), TRACE.read_text(), str(tmp_path / "rapl"),
                            clock=clock)
    # The captured tree's one package zone (socket 0) replays socket 0's package series;
    # its core sub-zone is no zone the exporter reads and stays as captured.
    assert [(z.zone.label, z.start_uj) for z in replay.zones] == [("package-0", PACKAGE_UJ)]
    zone = powercap.discover_zones(replay.root)[0]
    replay.advance()
    assert powercap.read_energy_uj(zone.path) == PACKAGE_UJ
    clock.now = 12.5
    replay.advance()
    expected = PACKAGE_UJ + round(Recording(series[(0, "package")]).joules(12.5) * 1e6)
    assert powercap.read_energy_uj(zone.path) == expected
    # The fixture itself is never written.
    assert powercap.read_energy_uj(str(ENERGY / "powercap/intel-rapl:0")) == PACKAGE_UJ


def test_replay_wraps_at_max_energy_range(tmp_path, series):
    tree = tmp_path / "tree"
    shutil.copytree(ENERGY / "powercap", tree)
    start = MAX_RANGE_UJ - 100_000_000  # ~3 s of the recorded package power below the wrap
    (tree / "intel-rapl:0/energy_uj").write_text(f"{start}\n")
    clock = Clock()
    replay = PowercapReplay(str(tree), TRACE.read_text(), str(tmp_path / "rapl"), clock=clock)
    path = replay.zones[0].zone.path
    readings = []
    for second in range(8):
        clock.now = float(second)
        replay.advance()
        readings.append(powercap.read_energy_uj(path))
    assert any(b < a for a, b in zip(readings, readings[1:], strict=False)), "must wrap"
    counted = sum(energy.counter_delta(a, b, MAX_RANGE_UJ)
                  for a, b in zip(readings, readings[1:], strict=False))
    assert counted / 1e6 == pytest.approx(Recording(series[(0, "package")]).joules(7.0))


def test_exporter_reads_the_replayed_package_energy(tmp_path, series):
    # The captured two-job series (901 busy, 902 light) scraped over the replayed tree: the
    # node's package joules between two scrapes are what the recording counted meanwhile,
    # and the jobs share them by CPU time.
    clock = Clock()
    replay = PowercapReplay(str(ENERGY / "powercap"), TRACE.read_text(), str(tmp_path / "rapl"),
                            clock=clock)
    node = tmp_path / "node"
    settings = make_settings(node, node_name="energy", powercap_root=replay.root, scontrol="")
    collector = JobsCollector(settings, user_name=lambda uid: "alice")
    next(c for c in collector.collectors if isinstance(c, EnergyCollector)).clock = clock

    def scrape_at(snapshot: str, t: float) -> str:
        for part in ("cgroup", "proc"):
            shutil.copytree(ENERGY / "series" / snapshot / part, node / part, dirs_exist_ok=True)
        clock.now = t
        replay.advance()
        registry = CollectorRegistry()
        registry.register(collector)
        return generate_latest(registry).decode()

    scrape_at("t0", 3.0)  # the baseline
    text = scrape_at("t1", 8.0)
    rec = Recording(series[(0, "package")])
    package = value(text, "jobs_node_energy_joules_total", source="package")
    assert package == pytest.approx(rec.joules(8.0) - rec.joules(3.0), abs=1e-6)
    assert package == pytest.approx(5 * rec.mean_watts, rel=0.05)
    busy, light = (value(text, "jobs_energy_joules_total", jobid=j, source="cpu")
                   for j in ("901", "902"))
    assert busy > 5 * light > 0
    assert busy + light <= package


def test_cli_refuses_a_tree_the_trace_has_no_zone_of(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_:
        main(["--once", "--no-gpus", "--powercap-replay", str(TRACE),
              "--powercap-root", str(tmp_path / "empty")])
    assert exit_.value.code == 2
    assert "--powercap-replay: no zone under" in capsys.readouterr().err
