"""Energy attribution on the real local stack: a real busy job's cgroup beside the node's
other jobs, scraped in-process with a replayed RAPL tree (the captured node_exporter
zone, its counter advanced here) and the captured FreeIPMI reading as the node meter;
and the demo as it runs: the stack's exporters replay a recorded RAPL series, so a
finished CPU job's report has kWh and CO2e.

Needs root and the stack (conftest's ``stack_env``). Submits two jobs of its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from jobs_exporter import bmc
from jobs_exporter.collectors.energy import EnergyCollector
from jobs_exporter.registry import JobsCollector
from jobs_exporter.settings import Settings
from tests.helpers.exporter_scrape import FIXTURES, samples
from tests.helpers.promtool import check_metrics
from tests.helpers.stack import (
    BUSY,
    StackJob,
    jobreport,
    node_of,
    submit,
    wait_for_scrape_after,
    wait_until_done,
)
from tests.helpers.wait import wait_for

ENERGY = FIXTURES / "energy"
ZONE = "intel-rapl:0/energy_uj"


def _scrape(collector: JobsCollector) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def _energy(text: str) -> tuple[dict[str, float], float, float, float]:
    """(job id -> joules, unattributed, meter, package) of one exposition."""
    jobs: dict[str, float] = {}
    values = samples(text)
    for (name, labels), value in values.items():
        if name == "jobs_energy_joules_total":
            job = dict(labels)["jobid"]
            jobs[job] = jobs.get(job, 0.0) + value
    return (jobs, values[("jobs_node_unattributed_energy_joules_total", ())],
            values[("jobs_node_energy_joules_total", (("source", "meter"),))],
            values[("jobs_node_energy_joules_total", (("source", "package"),))])


def _cpu_seconds(text: str, job_id: str) -> float:
    return sum(value for (name, labels), value in samples(text).items()
               if name == "jobs_cpu_seconds_total" and dict(labels).get("jobid") == job_id)


@pytest.mark.stack
def test_real_job_energy_adds_up_to_the_meter(stack_env, tmp_path):
    job_id = submit(StackJob("energy-busy", "alice", ("-c1", "--mem=200M", "--time=3"),
                             BUSY.format(s=120)))
    try:
        node = node_of(job_id, timeout=2700)  # the shared stack may be busy (dozens queued)
        powercap = shutil.copytree(ENERGY / "powercap", tmp_path / "powercap")
        collector = JobsCollector(
            Settings(gpus="off", powercap_root=str(powercap), hwmon_root=str(tmp_path / "none"),
                     node_name=node),
            user_name=lambda uid: f"uid{uid}")
        energy = next(c for c in collector.collectors if isinstance(c, EnergyCollector))
        text = (ENERGY / "bmc/freeipmi_ipmi-dcmi_get-system-power-statistics.txt").read_text()
        energy.bmc = bmc.BmcPoller(lambda: text, bmc.parse_ipmi_dcmi, 30)
        energy.bmc.poll_once()
        counter = int((powercap / ZONE).read_text())
        # The job's cgroup seen and its busy loop counted: it has a share to be given.
        wait_for(lambda: _cpu_seconds(_scrape(collector), job_id) > 0, 60,
                 f"job {job_id}'s CPU seconds exported", every=0.5)
        _scrape(collector)  # the baseline
        scrapes = []
        for _ in range(3):
            time.sleep(2)
            counter += 40_000_000  # 40 J of package energy per interval
            (powercap / ZONE).write_text(f"{counter}\n")
            scrapes.append(_scrape(collector))
        for a, b in zip(scrapes, scrapes[1:], strict=False):
            (jobs_a, idle_a, meter_a, _), (jobs_b, idle_b, meter_b, _) = _energy(a), _energy(b)
            meter = meter_b - meter_a
            assert meter == pytest.approx(332 * 2, rel=0.25)  # ~2 s at 332 W
            jobs = sum(jobs_b.values()) - sum(jobs_a.get(j, 0.0) for j in jobs_b)
            assert abs(jobs + (idle_b - idle_a) - meter) <= 0.01 * meter
        last = samples(scrapes[-1])
        busy_cpu = last[("jobs_energy_joules_total", (("jobid", job_id), ("source", "cpu")))]
        assert 0 < busy_cpu <= 120  # its share of 3 x 40 J of package energy
        assert check_metrics(scrapes[-1]) == (0, "")
    finally:
        subprocess.run(["scancel", job_id], check=False)


@pytest.mark.stack
def test_finished_cpu_job_report_has_energy_and_co2e(stack_env):
    # No RAPL here: the CPU nodes' exporters replay a recorded one (scripts/dev-stack), and
    # no site intensity is set: the report uses the world's yearly average it ships.
    job_id = submit(StackJob("energy-report", "alice", ("-p", "debug", "-c1", "--mem=100M",
                                                        "--time=3"), BUSY.format(s=15)))
    try:
        assert node_of(job_id, timeout=2700).startswith("cpu")
        wait_until_done([job_id], timeout=600)
        # The job's last counter values reached Prometheus: one scrape after its end.
        wait_for_scrape_after(stack_env["JOBREPORT_PROMETHEUS_URL"], time.time())
        shown = jobreport("show", job_id, "--format", "json", env=stack_env)
        assert shown.returncode == 0, shown.stderr
        energy = json.loads(shown.stdout)["energy"]
        assert energy is not None, "no energy block: the CPU node has no energy series"
        assert energy["joules"] > 0 and energy["kwh"] > 0
        assert [n["node"] for n in energy["by_node"]][0].startswith("cpu")
        assert energy["carbon_intensity_g_per_kwh"] > 0
        assert energy["co2e_grams"] == pytest.approx(
            energy["kwh"] * energy["carbon_intensity_g_per_kwh"])
        assert "World" in energy["carbon_intensity_source"]
        assert "yearly average, source Ember" in energy["carbon_intensity_source"]
    finally:
        subprocess.run(["scancel", job_id], check=False)
