"""Node energy and its split among jobs: parsers on captured BMC/sysfs output, the
attribution on literal numbers, and the exporter replaying a captured counter series."""

from __future__ import annotations

import pathlib
import shutil
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from jobs_exporter import bmc, energy, hwmon, powercap
from jobs_exporter.collectors.energy import EnergyCollector
from jobs_exporter.gpu_nvidia import Nvml
from jobs_exporter.registry import JobsCollector
from tests.helpers.exporter_scrape import FIXTURES, make_settings, samples, scrape
from tests.helpers.fake_nvml import FakeNvml
from tests.helpers.promtool import check_metrics

ENERGY = FIXTURES / "energy"
SERIES = ENERGY / "series"
SNAPSHOTS = sorted(SERIES.iterdir())
PACKAGE_UJ = 240422366267  # intel-rapl:0/energy_uj of the capture
MAX_RANGE_UJ = 262143328850
PACKAGE_WATTS = 95.0  # intel-rapl:0/constraint_0_max_power_uw of the same capture


# ---------------------------------------------------------------- parsers


def test_bmc_parsers_on_captured_output():
    ipmitool = ENERGY / "bmc/ipmitool_dcmi_power_reading.txt"
    assert bmc.parse_ipmitool(ipmitool.read_text()) == 2578
    freeipmi = ENERGY / "bmc/freeipmi_ipmi-dcmi_get-system-power-statistics.txt"
    assert bmc.parse_ipmi_dcmi(freeipmi.read_text()) == 332
    # Two power inputs on chassis 1 (344 W + 53 W), one on chassis 2.
    chassis = [(ENERGY / f"bmc/redfish_chassis_{n}_power.json").read_text() for n in (1, 2)]
    assert [bmc.parse_redfish_power(text) for text in chassis] == [397, 1696]


@pytest.mark.parametrize(
    "parse, text",
    [
        (bmc.parse_ipmitool, "Power reading state is: deactivated"),
        (bmc.parse_ipmi_dcmi, "Power Measurement : Not Available"),
        (bmc.parse_redfish_power, '{"PowerControl": [{"MemberId": "0"}]}'),
    ],
)
def test_bmc_parsers_refuse_a_reading_without_watts(parse, text):
    with pytest.raises(ValueError):
        parse(text)


def test_powercap_zones_of_the_captured_tree():
    zones = powercap.discover_zones(str(ENERGY / "powercap"))
    # package-0 only: its core sub-zone is part of it, and `intel-rapl` is not a zone.
    assert [(pathlib.Path(z.path).name, z.kind, z.max_range_uj) for z in zones] == [
        ("intel-rapl:0", "package", MAX_RANGE_UJ)
    ]
    assert powercap.read_energy_uj(zones[0].path) == PACKAGE_UJ
    assert powercap.parse_zone_kind("dram\n") == "dram"
    assert powercap.parse_zone_kind("psys") is None
    assert powercap.discover_zones(str(ENERGY / "no-such-root")) == []


def test_hwmon_tree_without_power_sensors_has_none():
    assert hwmon.discover_sensors(str(ENERGY / "hwmon")) == []


def test_counter_wraps_at_max_energy_range():
    assert energy.counter_delta(100, 350, MAX_RANGE_UJ) == 250
    assert energy.counter_delta(MAX_RANGE_UJ - 100, 50, MAX_RANGE_UJ) == 150


def test_proc_stat_and_meminfo_of_the_capture():
    t0, t1 = SNAPSHOTS[0] / "proc", SNAPSHOTS[1] / "proc"
    busy0, cpus = energy.parse_proc_stat((t0 / "stat").read_text())
    busy1, _ = energy.parse_proc_stat((t1 / "stat").read_text())
    assert cpus == 2
    assert 0 < busy1 - busy0
    assert energy.parse_meminfo_used((t0 / "meminfo").read_text()) > 0


# ---------------------------------------------------------------- attribution


def test_attribution_adds_up_to_the_meter():
    node = energy.NodeInterval(
        package_joules=600.0,
        dram_joules=60.0,
        meter_joules=2000.0,
        gpu_joules={0: 300.0, 1: 40.0},
        busy_cpu_seconds=30.0,
        used_memory_bytes=100e9,
        cores=32,
    )
    jobs = [
        energy.JobInterval("1", cpu_seconds=20.0, memory_bytes=60e9, cores=8, gpus=(0,)),
        energy.JobInterval("2", cpu_seconds=5.0, memory_bytes=10e9, cores=8),
    ]
    result = energy.attribute(node, jobs)
    one, two = result.jobs["1"], result.jobs["2"]
    assert one["cpu"] == pytest.approx(400.0)  # 20 of 30 busy CPU seconds
    assert two["cpu"] == pytest.approx(100.0)
    assert one["dram"] == pytest.approx(36.0) and two["dram"] == pytest.approx(6.0)
    assert one["gpu"] == 300.0 and two["gpu"] == 0.0  # GPU 1 is nobody's
    rest = 2000.0 - (400 + 100 + 36 + 6 + 300)
    assert one["other"] == pytest.approx(rest * 8 / 32)
    assert result.unattributed_joules == pytest.approx(rest * 16 / 32)
    total = sum(v for shares in result.jobs.values() for v in shares.values())
    assert total + result.unattributed_joules == pytest.approx(2000.0)


def test_attribution_without_meter_adds_up_to_the_parts():
    node = energy.NodeInterval(package_joules=100.0, dram_joules=0.0, meter_joules=None,
                               busy_cpu_seconds=2.0, cores=4)
    result = energy.attribute(node, [energy.JobInterval("1", 1.0, 0.0, 2)])
    assert result.jobs["1"]["cpu"] == pytest.approx(50.0)
    assert result.jobs["1"]["other"] + result.unattributed_joules == pytest.approx(50.0)


def test_meter_below_the_parts_leaves_no_negative_share():
    node = energy.NodeInterval(package_joules=500.0, dram_joules=0.0, meter_joules=400.0,
                               busy_cpu_seconds=1.0, cores=2)
    result = energy.attribute(node, [energy.JobInterval("1", 1.0, 0.0, 1)])
    assert result.jobs["1"]["other"] == 0.0 and result.unattributed_joules == 0.0


# ---------------------------------------------------------------- exporter on a replay


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _busy_seconds(snapshot: pathlib.Path) -> float:
    busy, _ = energy.parse_proc_stat((snapshot / "proc/stat").read_text())
    return busy / 100  # USER_HZ


def _replay(tmp_path, start_uj=PACKAGE_UJ, meter=True, nvml=None, clock=None,
            restart_at=None, saved_at=None):
    """Scrape the captured series once per snapshot: the cgroup and /proc files of each
    snapshot put in place, the package counter advanced by 95 W times the node's busy
    fraction (as a package at its limit would count), the BMC serving the FreeIPMI
    capture's 332 W. Returns [(seconds since t0, exposition text)] and the counters.

    ``restart_at``: the exporter is started anew before that snapshot's scrape, from the
    state saved after snapshot ``saved_at`` (a crash) or at its stop (None)."""
    tree = tmp_path / "node"
    shutil.copytree(ENERGY / "powercap", tree / "powercap")
    state = str(tmp_path / "state.json") if restart_at is not None else ""
    settings = make_settings(tree, node_name="energy", powercap_root=str(tree / "powercap"),
                             gpus="auto" if nvml else "off", scontrol="", state_file=state)
    clock = clock or Clock()

    def start() -> tuple[JobsCollector, EnergyCollector]:
        collector = JobsCollector(settings, nvml=nvml, user_name=lambda uid: "alice")
        if collector.state is not None:
            collector.state.due = lambda: False  # saved by hand below
        found = next(c for c in collector.collectors if isinstance(c, EnergyCollector))
        found.clock = clock
        return collector, found

    collector, energy_collector = start()
    if meter:
        text = (ENERGY / "bmc/freeipmi_ipmi-dcmi_get-system-power-statistics.txt").read_text()
        energy_collector.bmc = bmc.BmcPoller(lambda: text, bmc.parse_ipmi_dcmi, 30, clock)
    t0 = float((SNAPSHOTS[0] / "time").read_text())
    counter, written = start_uj, []
    out = []
    for i, snapshot in enumerate(SNAPSHOTS):
        if i == restart_at:
            if saved_at is None:
                collector.save_state()
            collector, energy_collector = start()
        clock.now = float((snapshot / "time").read_text()) - t0
        for part in ("cgroup", "proc"):  # written in place: the exporter keeps files open
            shutil.copytree(snapshot / part, tree / part, dirs_exist_ok=True)
        if i:
            seconds = clock.now - out[-1][0]
            fraction = (_busy_seconds(snapshot) - _busy_seconds(SNAPSHOTS[i - 1])) / (2 * seconds)
            counter = (counter + round(PACKAGE_WATTS * fraction * seconds * 1e6)) % MAX_RANGE_UJ
        (tree / "powercap/intel-rapl:0/energy_uj").write_text(f"{counter}\n")
        written.append(counter)
        if meter:
            energy_collector.bmc.poll_once()
        registry = CollectorRegistry()
        registry.register(collector)
        out.append((clock.now, generate_latest(registry).decode()))
        if i == saved_at:
            collector.save_state()
    return out, written


def _get(text, name, **labels):
    return samples(text).get((name, tuple(sorted(labels.items()))))


def test_replay_jobs_plus_unattributed_equal_the_meter_every_interval(tmp_path):
    scrapes, _ = _replay(tmp_path)
    for (t_a, a), (t_b, b) in zip(scrapes[1:], scrapes[2:], strict=False):
        def delta(name, a=a, b=b, **labels):
            return (_get(b, name, **labels) or 0.0) - (_get(a, name, **labels) or 0.0)

        meter = delta("jobs_node_energy_joules_total", source="meter")
        assert meter == pytest.approx(332 * (t_b - t_a))
        jobs = sum(
            delta("jobs_energy_joules_total", jobid=j, source=s)
            for j in ("901", "902") for s in ("cpu", "other")
        )
        unattributed = delta("jobs_node_unattributed_energy_joules_total")
        assert abs(jobs + unattributed - meter) <= 0.01 * meter
        # The busy job used ~10x the CPU time of the light one: so goes the package.
        busy, light = (delta("jobs_energy_joules_total", jobid=j, source="cpu")
                       for j in ("901", "902"))
        assert busy > 5 * light > 0
    last = scrapes[-1][1]
    assert check_metrics(last) == (0, "")
    # No DRAM zone, no GPU in this capture: those sources are absent, not 0.
    assert _get(last, "jobs_node_energy_joules_total", source="dram") is None
    assert _get(last, "jobs_energy_joules_total", jobid="901", source="dram") is None
    assert _get(last, "jobs_energy_joules_total", jobid="901", source="gpu") is None
    assert _get(last, "jobs_node_power_watts", source="bmc") == 332


def test_replay_package_counter_wrapping_around(tmp_path):
    # Start the counter ~1.5 intervals of package energy below its wrap-around.
    scrapes, written = _replay(tmp_path, start_uj=MAX_RANGE_UJ - 800_000_000, meter=False)
    assert any(b < a for a, b in zip(written, written[1:], strict=False)), "the series must wrap"
    pairs = zip(written, written[1:], strict=False)
    expected = sum(energy.counter_delta(a, b, MAX_RANGE_UJ) for a, b in pairs)
    package = _get(scrapes[-1][1], "jobs_node_energy_joules_total", source="package")
    assert package == pytest.approx(expected / 1e6)
    assert 0 < package < 95 * (scrapes[-1][0] - scrapes[0][0])
    # Without a meter the jobs get their CPU share and nothing else.
    last = scrapes[-1][1]
    assert _get(last, "jobs_energy_joules_total", jobid="901", source="other") is None
    assert _get(last, "jobs_node_unattributed_energy_joules_total") is None


def test_no_source_no_energy_series(tmp_path):
    text = scrape(make_settings(SNAPSHOTS[0], node_name="energy"))
    assert "jobs_energy_joules_total{" not in text
    assert "jobs_node_energy_joules_total{" not in text
    assert 'jobs_scrape_collector_success{collector="energy"} 1.0' in text


def test_replay_gpu_energy_by_allocation(tmp_path):
    clock = Clock()
    alloc = tmp_path / "node/no-gpu-alloc"
    alloc.mkdir(parents=True)
    # The prolog's files: job 901 holds GPU 0 (the H100 of the replay, first in PCI bus
    # order), job 902 none; GPU 1 (the T4) is nobody's.
    (alloc / "901").write_text("0\n")
    (alloc / "902").write_text("\n")
    # No meter: the replay's GPUs alone (659 W) draw more than the captured BMC reading.
    scrapes, _ = _replay(tmp_path, nvml=FakeNvml(clock=clock), clock=clock, meter=False)
    t_first, (t_last, last) = scrapes[0][0], scrapes[-1]
    # per GPU (the index jobs_gpu_* labels it with): one figure per card for the report
    gpu = _get(last, "jobs_energy_joules_total", jobid="901", source="gpu", gpu="0")
    assert gpu == pytest.approx(631.95 * (t_last - t_first))
    assert _get(last, "jobs_gpu_energy_joules_total", jobid="901", gpu="0") == pytest.approx(
        631.95 * t_last
    )
    # Job 902 holds no GPU: no GPU energy series (absent, not 0 J); its CPU share stays.
    assert _get(last, "jobs_energy_joules_total", jobid="902", source="gpu") is None
    assert _get(last, "jobs_energy_joules_total", jobid="902", source="cpu") > 0
    node_gpu = _get(last, "jobs_node_energy_joules_total", source="gpu")
    assert node_gpu == pytest.approx((631.95 + 26.78) * (t_last - t_first))
    assert check_metrics(last) == (0, "")


def test_gpu_without_energy_counter_integrates_power():
    clock = Clock()
    devices = [dict(d, energy_counter=False) for d in FakeNvml().devices]
    nvml = Nvml(FakeNvml(devices, clock=clock), clock=clock)
    assert nvml.start()
    assert nvml.energy_joules(1) == 0.0
    clock.now = 10.0
    assert nvml.energy_joules(1) == pytest.approx(267.8)  # the T4's 26.78 W for 10 s


def test_bmc_poller_serves_the_last_good_reading_with_its_age():
    clock = Clock()
    text = (ENERGY / "bmc/freeipmi_ipmi-dcmi_get-system-power-statistics.txt").read_text()
    answers = iter([text, "ipmi-dcmi: connection timeout"])
    poller = bmc.BmcPoller(lambda: next(answers), bmc.parse_ipmi_dcmi, 30, clock)
    assert poller.latest() is None
    clock.now = 5.0
    poller.poll_once()
    clock.now = 40.0
    poller.poll_once()  # unparsable: the previous reading stays, older
    assert poller.latest() == bmc.Reading(332.0, 5.0)


def test_bmc_poller_runs_outside_the_scrape():
    asked = []

    def ask() -> str:
        asked.append(1)
        return (ENERGY / "bmc/ipmitool_dcmi_power_reading.txt").read_text()

    poller = bmc.BmcPoller(ask, bmc.parse_ipmitool, 3600)
    poller.start()
    try:
        for _ in range(100):
            if poller.latest():
                break
            time.sleep(0.02)
        assert poller.latest().watts == 2578
        assert len(asked) == 1  # once per interval, not once per scrape
    finally:
        poller.stop()


# ---------------------------------------------------------------- a restart of the exporter

# The captured series has no readable processes: I/O and waits over a restart are in
# test_exporter_io_totals.py and test_exporter_cpu_wait.py, all three live on the stack
# (tests/stack/test_exporter_restart.py).
SUMS = (("jobs_energy_joules_total", {"source": "cpu"}),
        ("jobs_energy_joules_total", {"source": "gpu", "gpu": "0"}))


def _sums(text: str) -> dict[tuple[str, str], float | None]:
    return {(name, str(labels)): _get(text, name, jobid="901", **labels)
            for name, labels in SUMS}


def _gpu_replay(clock):
    nvml = FakeNvml(clock=clock)
    nvml.energy_origin = 0.0  # the driver counts on while the exporter restarts
    return nvml


@pytest.mark.parametrize("saved_at", [None, 1], ids=["stopped", "crashed-after-a-save"])
def test_a_restart_loses_no_joules(tmp_path, saved_at):
    """The sums the exporter adds up itself go on over its restart: after a clean stop
    exactly, after a crash from the last save (the interval since counted at the first
    scrape, split by the CPU time in it) within 1 %."""
    (tmp_path / "a/node/no-gpu-alloc").mkdir(parents=True)
    (tmp_path / "a/node/no-gpu-alloc/901").write_text("0\n")
    clock = Clock()
    steady, _ = _replay(tmp_path / "a", nvml=_gpu_replay(clock), clock=clock, meter=False)
    (tmp_path / "b/node/no-gpu-alloc").mkdir(parents=True)
    (tmp_path / "b/node/no-gpu-alloc/901").write_text("0\n")
    clock = Clock()
    restarted, _ = _replay(tmp_path / "b", nvml=_gpu_replay(clock), clock=clock,
                           meter=False, restart_at=len(SNAPSHOTS) - 2, saved_at=saved_at)
    want, got = _sums(steady[-1][1]), _sums(restarted[-1][1])
    assert all(v for v in want.values()), want  # every sum counted something
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9 if saved_at is None else 0.01), key
    # never below what was served before the restart: no counter reset for Prometheus
    before = _sums(restarted[-3][1])
    assert all(got[k] >= before[k] for k in before)


def test_state_of_another_boot_or_version_is_not_used(tmp_path, caplog):
    from jobs_exporter.state import VERSION, StateFile

    path = tmp_path / "state.json"
    StateFile(str(path), boot=lambda: "boot-a").save({"io": {"7": {}}})
    assert StateFile(str(path), boot=lambda: "boot-a").load() == {"io": {"7": {}}}
    assert StateFile(str(path), boot=lambda: "boot-b").load() == {}
    path.write_text(path.read_text().replace(f'"version":{VERSION}', '"version":0'))
    assert StateFile(str(path), boot=lambda: "boot-a").load() == {}
    path.write_text("{not json")
    with caplog.at_level("ERROR"):
        assert StateFile(str(path)).load() == {}
    assert "unreadable" in caplog.text


def test_state_that_cannot_be_saved_is_logged_not_raised(tmp_path, caplog):
    from jobs_exporter.state import StateFile

    state = StateFile(str(tmp_path / "missing-dir" / "state.json"))
    with caplog.at_level("ERROR"):
        state.save({})
        state.save({})
    assert caplog.text.count("cannot save state") == 1  # once until it works again
