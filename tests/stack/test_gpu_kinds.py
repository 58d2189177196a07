"""The stack's AMD node and its node whose card is in MIG mode, live: a job that sleeps on
one MI300X (gres type mi300x, node gpu3: two idle MI300X of a real 8-GPU node's amd-smi
output, replayed through amdsmi's calls) and one that sleeps on a 1g.10gb MIG device (node
gpu4: a real H100 in MIG mode, replayed through NVML's MIG calls) each get the idle-GPU
finding, naming the device they held."""

from __future__ import annotations

import time

import pytest
import requests

from tests.helpers import stack
from webapp.renderers.json import to_dict

# A MIG device's utilisation has no sample at the job's first scrape (it is the change
# between two scrapes' GPM samples), and under load that first scrape can come 6 s after
# Slurm's start: 11 s of a 25 s run without a sample (run am: the GPUs' coverage 76 %,
# under the 80 % the GPU verdicts need, the idle finding withheld). The MIG job runs 50 s.
JOBS = {
    "mi300x": stack.StackJob("gpu-mi300x-idle", "bob", (
        "-c1", "--mem=100M", "-p", "gpu", "--gres=gpu:mi300x:1", "--time=5"), "sleep 25"),
    "1g.10gb": stack.StackJob("gpu-mig-idle", "alice", (
        "-c1", "--mem=100M", "-p", "gpu", "--gres=gpu:1g.10gb:1", "--time=5"), "sleep 50"),
}


@pytest.fixture(scope="module")
def idle_jobs(stack_env, service) -> dict[str, str]:
    ids = {kind: stack.submit(job) for kind, job in JOBS.items()}
    states = stack.wait_until_done(list(ids.values()), timeout=300)
    assert set(states.values()) == {"COMPLETED"}, states
    stack.wait_for_scrape_after(service.settings.prometheus_url, time.time())
    return ids


def gpu_info(url: str, job_id: str) -> list[dict[str, str]]:
    r = requests.get(f"{url}/api/v1/query", timeout=30, params={
        "query": f'last_over_time(jobs_gpu_info{{jobid="{job_id}"}}[10m])'})
    return [row["metric"] for row in r.json()["data"]["result"]]


def idle_finding(service, job_id: str) -> tuple[dict, dict]:
    data = to_dict(service.build(job_id))
    found = [f for f in data["findings"] if f["name"] == "gpu_idle"]
    assert len(found) == 1, [f["name"] for f in data["findings"]]
    return data, found[0]


def test_a_job_sleeping_on_an_mi300x_gets_the_idle_gpu_finding(idle_jobs, service):
    job_id = idle_jobs["mi300x"]
    data, finding = idle_finding(service, job_id)
    assert data["nodes"] == ["gpu3"]
    (info,) = gpu_info(service.settings.prometheus_url, job_id)
    assert (info["vendor"], info["model"]) == ("amd", "MI300X-O")
    assert info["pci_bus_id"] in {"0000:46:00.0", "0000:85:00.0"}  # the two idle GPUs
    assert finding["evidence"]["idle_gpus"] == f"gpu3/{info['gpu']}"  # the device named
    assert finding["evidence"]["idle_max_utilization"] == 0.0
    assert finding["evidence"]["idle_gpus_energy_joules"] > 0  # its replayed power
    # the advice in ROCm's words, the device as the report knows it
    assert "`ROCR_VISIBLE_DEVICES`" in finding["advice"] and "`rocm-smi`" in finding["advice"]
    (device,) = data["usage"]["gpu_devices"]
    assert (device["vendor"], device["pci_bus_id"]) == ("amd", info["pci_bus_id"])


def test_a_job_sleeping_on_a_1g_10gb_mig_device_gets_the_idle_gpu_finding(idle_jobs, service):
    job_id = idle_jobs["1g.10gb"]
    data, finding = idle_finding(service, job_id)
    assert data["nodes"] == ["gpu4"]
    (info,) = gpu_info(service.settings.prometheus_url, job_id)
    assert info["gpu"] in {"0/9", "0/10"}  # /dev/nvidia0's GPU instance 9 or 10
    assert (info["profile"], info["power_share"]) == ("1g.10gb", "1/7")
    assert info["parent_uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert finding["evidence"]["idle_gpus"] == f"gpu4/{info['gpu']}"  # the device named
    assert "`CUDA_VISIBLE_DEVICES`" in finding["advice"]
    (device,) = data["usage"]["gpu_devices"]
    assert (device["vendor"], device["profile"]) == ("nvidia", "1g.10gb")
    assert device["power_share"] == "1/7" and "an estimate: 1/7" in finding["message"]
    assert finding["evidence"]["idle_max_utilization"] == 0.0
    # its seventh of the card's 433.78 W over the job
    joules = finding["evidence"]["idle_gpus_energy_joules"]
    assert 433.78 / 7 * 20 < joules < 433.78 / 7 * 80
