"""slurm-exporter on the real stack: a node drained under a running job, and pending
reasons of jobs that cannot start, each counted once.

The node is shared with other tests: it is resumed in a `finally` right after each check.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slurm_exporter.registry import SlurmCollector, build_sources
from slurm_exporter.settings import Settings
from tests.helpers.slurm_wrappers import require_slurm
from tests.helpers.stack import IDLE_GPU, node_of
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.stack


def scrape() -> dict[str, list]:
    """A fresh exporter (poll limit irrelevant: one scrape) -> name -> samples."""
    registry = CollectorRegistry()
    registry.register(SlurmCollector("demo", build_sources(Settings(poll_limit=60))))
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def sbatch(user: str, *args: str) -> str:
    cmd = ["runuser", "-u", user, "--", "sbatch", "--parsable", "-o", "/dev/null",
           "--chdir", "/tmp", *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out.strip().split(";")[0]



@pytest.fixture()
def jobs() -> Iterator[list[str]]:
    require_slurm()
    ids: list[str] = []
    yield ids
    if ids:
        subprocess.run(["scancel", *ids], check=True)


def test_draining_a_node_under_a_job_shows_mixed_drain_and_no_available_gpu(jobs):
    jobs.append(sbatch("alice", "-J", "slurmexp-drain", "-c1", "--mem=100M", *IDLE_GPU,
                       "--time=5", "--wrap", "sleep 120"))
    node = node_of(jobs[0], timeout=240)  # the T4 node: both of that type's GPUs are on it
    try:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain",
                        "reason=slurm-exporter stack test"], check=True)
        held = subprocess.run(["scontrol", "show", "node", node], check=True,
                              capture_output=True, text=True).stdout
        metrics = scrape()
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=True)
    (info,) = [s for s in metrics["slurm_node_state_info"] if s.labels["node"] == node]
    expected = held.split(" State=", 1)[1].split()[0].lower()  # e.g. MIXED+DRAIN
    assert f"{info.labels['state']}+{info.labels['flags']}" == "+".join(
        [expected.split("+")[0], *sorted(expected.split("+")[1:])])
    assert info.labels["reason"] == "slurm-exporter stack test"
    # The other CPU may be busy with another test's job; with it idle, Slurm holds MIXED.
    # PLANNED may stand beside DRAIN: the backfill scheduler had planned a pending job here.
    if "MIXED" in held:
        assert info.labels["state"] == "mixed"
        assert "drain" in info.labels["flags"].split("+")
    drained = [s for s in metrics["slurm_gpus_idle"] if "drain" in s.labels["flags"]]
    assert sum(s.value for s in metrics["slurm_gpus"] if "drain" in s.labels["flags"]) == 2
    assert drained, "idle GPUs of the drained node are counted under its state"
    assert [s.value for s in metrics["slurm_gpus_available"]
            if s.labels["gpu_type"] == "t4"] == [0]
    after = scrape()  # resumed: its idle GPUs count as available again (unless all busy)
    (info,) = [s for s in after["slurm_node_state_info"] if s.labels["node"] == node]
    assert "drain" not in info.labels["flags"]


def test_pending_reasons_appear_and_each_job_counts_once(jobs):
    before = scrape()

    def pending(metrics: dict, reason: str) -> float:
        return sum(s.value for s in metrics.get("slurm_pending_jobs", [])
                   if s.labels["reason"] == reason)

    jobs.append(sbatch("alice", "-J", "slurmexp-held", "-H", "--mem=100M", "--time=5",
                       "--array=1-3", "--wrap", "sleep 1"))
    jobs.append(sbatch("bob", "-J", "slurmexp-later", "--begin=now+1hour", "--mem=100M",
                       "--time=5", "--wrap", "sleep 1"))
    grown: dict[str, float] = {}

    def counted() -> dict | None:
        after = scrape()
        grown.update({r: pending(after, r) - pending(before, r)
                      for r in ("JobHeldUser", "BeginTime")})
        return after if grown == {"JobHeldUser": 3, "BeginTime": 1} else None

    after = wait_for(counted, 30, lambda: f"the new pending jobs counted: {grown}")
    listed = subprocess.run(["squeue", "-h", "-r", "-t", "PD", "-o", "%i"], check=True,
                            capture_output=True, text=True).stdout.split()
    # Every pending job in exactly one reason (the scrape and squeue are a moment apart).
    assert abs(sum(s.value for s in after["slurm_pending_jobs"]) - len(listed)) <= 2
    users = {s.labels["user"]: s.value for s in after["slurm_user_jobs"]
             if s.labels["state"] == "PENDING"}
    assert users.get("alice", 0) >= 3 and users.get("bob", 0) >= 1
