"""slurm-exporter on Slurm 24.11 (VM cluster v24) and 26.05 (v26), live: with a running job
and a pending one of this test, the exporter's node states, GPU counts, queue counts, fair
share and sdiag's job counters equal what the version's own sinfo/squeue/sshare/sdiag
print at the same moment; each exposition passes ``promtool check metrics``.

Two exporters are checked: the one deployed in the VM (deploy/slurm-exporter.service,
reached inside the VM on its port 9089) and this checkout's parsers and collectors, fed the
output of the exporter's own command lines (slurm_exporter.commands) run in the VM. The
test reads the commands with its own formats and its own parsing, in one call into the VM
(``snapshot``): checks, the exporter's commands, the deployed exporter, the checks again;
it retries until the two checks agree (other jobs come and go on these clusters).

The VMs must be running (scripts/vm-cluster start, or scripts/dev-stack start): the test
fails when they are not, it never skips.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slurm_exporter.commands import COMMAND_ENV, COMMANDS
from slurm_exporter.registry import PARSERS, SlurmCollector
from slurm_exporter.throttle import ThrottledSource
from tests.helpers.promtool import check_metrics
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parents[2]
VM_CLUSTER = ROOT / "scripts" / "vm-cluster"
CLUSTERS = ("v24", "v26")
DEPLOYED = "http://127.0.0.1:9089/metrics"  # the unit's port, inside the VM
SETTLE_SECONDS = 240  # to find a moment when no other job changed state

# The test's own reading of the cluster: other fields, other order, other parsing.
CHECKS = {
    "sinfo": ["sinfo", "-a", "-h", "-N", "-O",
              "PartitionName:|,NodeList:|,CPUsState:|,StateComplete:|,GresUsed:|,Gres:|,"
              "Reason:|"],
    "squeue": ["squeue", "-a", "-h", "-r", "-t", "all", "-o", "%i|%T|%P|%u|%r"],
    "sshare": ["sshare", "-a", "-n", "-P", "-o",
               "User,Account,LevelFS,FairShare,EffectvUsage,RawUsage,NormShares,RawShares"],
    "sdiag": ["sdiag"],
}
SSHARE_METRICS = ("slurm_fairshare_level", "slurm_fairshare", "slurm_share_effective_usage",
                  "slurm_share_raw_usage", "slurm_share_norm_shares",
                  "slurm_share_raw_shares")  # in the order of CHECKS["sshare"]
SDIAG_COUNTS = {"Jobs submitted": "slurm_scheduler_jobs_submitted_total",
                "Jobs started": "slurm_scheduler_jobs_started_total",
                "Jobs completed": "slurm_scheduler_jobs_completed_total",
                "Jobs canceled": "slurm_scheduler_jobs_canceled_total",
                "Jobs failed": "slurm_scheduler_jobs_failed_total",
                "Jobs pending": "slurm_scheduler_jobs_pending",
                "Jobs running": "slurm_scheduler_jobs_running"}

# Runs in the VM: each named command (or the deployed exporter's URL) in order, with the
# exporter's environment; their outputs as one JSON object.
IN_VM = """
import json, os, subprocess, sys, urllib.request
plan, env = json.loads(sys.argv[1]), {**os.environ, **json.loads(sys.argv[2])}
out = {}
for name, argv in plan:
    if isinstance(argv, str):
        out[name] = urllib.request.urlopen(argv, timeout=60).read().decode()
    else:
        out[name] = subprocess.run(argv, env=env, check=True, capture_output=True,
                                   text=True, timeout=60).stdout
print(json.dumps(out))
"""


def vm(cluster: str, *argv: str, user: str | None = None, timeout: float = 180) -> str:
    """``argv`` in the cluster's VM (``scripts/vm-cluster exec``), as root or ``user``."""
    if user:
        argv = ("runuser", "-u", user, "--", *argv)
    run = subprocess.run([str(VM_CLUSTER), "exec", cluster, *argv], capture_output=True,
                         text=True, timeout=timeout)
    if run.returncode:
        pytest.fail(f"{cluster}: {argv[:6]} exited {run.returncode} (is the VM up? "
                    f"scripts/vm-cluster start): {run.stderr.strip()[-500:]}")
    return run.stdout


def snapshot(cluster: str) -> dict[str, str]:
    """One moment of the cluster: ``before:*`` and ``after:*`` (the test's checks),
    ``exporter:*`` (the exporter's command lines) and ``deployed`` (its /metrics)."""
    plan = [*((f"before:{n}", a) for n, a in CHECKS.items()),
            *((f"exporter:{n}", list(a)) for n, a in COMMANDS.items()),
            ("deployed", DEPLOYED),
            *((f"after:{n}", a) for n, a in CHECKS.items())]
    return json.loads(vm(cluster, "python3", "-c", IN_VM, json.dumps(plan),
                         json.dumps(dict(COMMAND_ENV))))


# -- what the commands say (the test's own parsing) ------------------------------------

def from_commands(out: dict[str, str], when: str) -> dict[str, dict]:
    """The figures to compare, from the checks' output at ``when`` (before or after)."""
    return {**nodes_from_sinfo(out[f"{when}:sinfo"]),
            **queue_from_squeue(out[f"{when}:squeue"]),
            "shares": shares_from_sshare(out[f"{when}:sshare"]),
            "sdiag": {key: float(m[1]) for key in SDIAG_COUNTS
                      for m in [re.search(rf"^{key}:\s+(\d+)$", out[f"{when}:sdiag"], re.M)]}}


def gpus(gres: str) -> dict[str, int]:
    """``gpu:t4:1(IDX:0)`` -> {"t4": 1}; ``gpu:2`` -> {"untyped": 2}."""
    found: Counter[str] = Counter()
    for m in re.finditer(r"(?:^|,)gpu:(?:([^:,]+):)?(\d+)", gres):
        found[m[1] if m[1] not in (None, "(null)") else "untyped"] += int(m[2])
    return dict(found)


def nodes_from_sinfo(text: str) -> dict[str, dict]:
    state: dict[str, tuple[str, str, str]] = {}
    per_partition: Counter[tuple[str, str, str]] = Counter()
    node_gpus: dict[tuple[str, str], tuple[int, int]] = {}
    for line in text.splitlines():
        partition, node, cpus, complete, used, gres, reason = line.split("|")[:7]
        base, *flags = complete.split("+")
        alloc, _, _, total = (int(c) for c in cpus.split("/"))
        if base == "allocated" and 0 < alloc < total:  # sinfo's view of a drained node
            base = "mixed"  # (README: Slurm's own rule, some CPUs allocated = mixed)
        flags_text = "+".join(sorted(flags))
        state[node] = (base, flags_text, "" if reason == "none" else reason)
        per_partition[(partition, base, flags_text)] += 1
        for gpu_type, count in gpus(gres).items():
            node_gpus[(node, gpu_type)] = (count, gpus(used).get(gpu_type, 0))
    by_state: Counter[tuple[str, str, str, str]] = Counter()
    for (node, gpu_type), (total, alloc) in node_gpus.items():
        base, flags_text, _ = state[node]
        by_state[(gpu_type, base, flags_text, "total")] += total
        by_state[(gpu_type, base, flags_text, "alloc")] += alloc
    return {"node_state": state, "nodes": dict(per_partition), "node_gpus": node_gpus,
            "gpus_by_state": dict(by_state)}


def queue_from_squeue(text: str) -> dict[str, dict]:
    jobs: Counter[tuple[str, str]] = Counter()
    users: Counter[tuple[str, str]] = Counter()
    pending: Counter[tuple[str, str]] = Counter()
    named = {}
    for line in text.splitlines():
        job_id, state, partition, user, reason = line.split("|", 4)
        jobs[(state, partition)] += 1
        users[(user, state)] += 1
        if state == "PENDING":
            reason = "ReqNodeNotAvail" if reason.startswith("ReqNodeNotAvail") else reason
            pending[(reason, partition)] += 1
            named[job_id] = (partition, reason)
    return {"jobs": dict(jobs), "user_jobs": dict(users), "pending": dict(pending),
            "pending_jobs": named}


def shares_from_sshare(text: str) -> dict[tuple[str, str, str], float]:
    values = {}
    for line in text.splitlines():
        user, account, *numbers = line.split("|")
        for metric, number in zip(SSHARE_METRICS, numbers, strict=True):
            if number.strip():  # blank: left out by the exporter, not 0
                values[(account.strip(), user, metric)] = float(number)
    return values


# -- what an exporter says ----------------------------------------------------------------

def from_exposition(text: str) -> dict[str, dict]:
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append(s.labels | {"": s.value})

    def table(name: str, *labels: str) -> dict:
        return {tuple(s[x] for x in labels) if len(labels) > 1 else s[labels[0]]: s[""]
                for s in samples.get(name, [])}

    node_gpus = {(s["node"], s["gpu_type"]): (int(s[""]), int(a[""]))
                 for s in samples.get("slurm_node_gpus", [])
                 for a in samples["slurm_node_gpus_alloc"]
                 if (a["node"], a["gpu_type"]) == (s["node"], s["gpu_type"])}
    by_state = {}
    for name, kind in (("slurm_gpus", "total"), ("slurm_gpus_alloc", "alloc")):
        for key, value in table(name, "gpu_type", "state", "flags").items():
            by_state[(*key, kind)] = value
    return {
        "node_state": {s["node"]: (s["state"], s["flags"], s["reason"])
                       for s in samples.get("slurm_node_state_info", [])},
        "nodes": table("slurm_nodes", "partition", "state", "flags"),
        "node_gpus": node_gpus,
        "gpus_by_state": by_state,
        "jobs": table("slurm_jobs", "state", "partition"),
        "user_jobs": table("slurm_user_jobs", "user", "state"),
        "pending": table("slurm_pending_jobs", "reason", "partition"),
        "pending_jobs": {s["jobid"]: (s["partition"], s["reason"])
                         for s in samples.get("slurm_job_pending_info", [])},
        "shares": {(s["account"], s["user"], name): s[""] for name in SSHARE_METRICS
                   for s in samples.get(name, [])},
        "sdiag": {key: samples[name][0][""] for key, name in SDIAG_COUNTS.items()
                  if name in samples},
    }


def checkout_exposition(cluster: str, out: dict[str, str]) -> str:
    """This checkout's parsers and collectors on the exporter's command lines' output."""
    sources = {name: ThrottledSource(name, lambda p=parse, t=out[f"exporter:{name}"]: p(t),
                                     poll_limit=60)
               for name, parse in PARSERS.items()}
    registry = CollectorRegistry()
    registry.register(SlurmCollector(cluster, sources))
    return generate_latest(registry).decode()


def differences(expected: dict, seen: dict) -> dict[str, tuple]:
    return {k: (expected[k], seen.get(k)) for k in expected if expected[k] != seen.get(k)}


# -- the test ------------------------------------------------------------------------------

def sbatch(cluster: str, user: str, *args: str) -> str:
    out = vm(cluster, "sbatch", "--parsable", "--chdir", "/tmp", "-o", "/dev/null", *args,
             user=user)
    return out.strip().split(";")[0]


@pytest.fixture(params=CLUSTERS)
def cluster_jobs(request) -> Iterator[tuple[str, str, str]]:
    """(cluster, running job, pending job): alice's job holding one GPU, started ahead of
    the queue (its priority raised), and bob's held job asking for one; cancelled after."""
    cluster = request.param
    ids: list[str] = []
    try:
        ids.append(sbatch(cluster, "alice", "-J", "slurmexp-versions-run", "-c1",
                          "--mem=50M", "--gres=gpu:t4:1", "--time=10", "--wrap", "sleep 900"))
        ids.append(sbatch(cluster, "bob", "-J", "slurmexp-versions-held", "-H", "-c1",
                          "--mem=50M", "--gres=gpu:t4:1", "--time=10", "--wrap", "sleep 1"))
        vm(cluster, "scontrol", "update", f"jobid={ids[0]}", "priority=1000000")
        wait_for(lambda: vm(cluster, "squeue", "-h", "-j", ids[0], "-o", "%T").strip()
                 == "RUNNING", 300, f"{cluster}: job {ids[0]} running", every=2)
        yield cluster, ids[0], ids[1]
    finally:
        if ids:
            vm(cluster, "scancel", *ids)


def test_exporter_equals_the_versions_own_commands(cluster_jobs):
    cluster, running, held = cluster_jobs
    seen: dict = {"attempts": 0}

    def agree() -> bool:
        seen["attempts"] += 1
        out = snapshot(cluster)
        expected = from_commands(out, "before")
        stable = expected == from_commands(out, "after")
        checkout = checkout_exposition(cluster, out)
        diffs = {"checkout": differences(expected, from_exposition(checkout)),
                 "deployed": differences(expected, from_exposition(out["deployed"]))}
        seen.update(out=out, expected=expected, checkout=checkout, stable=stable, diffs=diffs)
        return stable and not any(diffs.values())

    wait_for(agree, SETTLE_SECONDS, lambda: (
        f"{cluster}: after {seen['attempts']} snapshots, stable={seen['stable']}; "
        f"differences (expected, seen): {seen['diffs']}"))
    out, expected, checkout = seen["out"], seen["expected"], seen["checkout"]
    deployed = out["deployed"]
    # The moment compared holds this test's jobs, as each version's squeue printed them.
    assert "RUNNING|debug|alice|None" in {
        line.split("|", 1)[1] for line in out["before:squeue"].splitlines()
        if line.startswith(f"{running}|")}
    assert expected["pending_jobs"][held] == ("debug", "JobHeldUser")
    node = f"{cluster}n1"
    assert expected["node_gpus"][(node, "t4")][1] >= 1  # this test's job holds one
    assert expected["shares"][("research", "alice", "slurm_share_raw_shares")] == 1.0
    up = {s.labels["source"]: s.value for f in text_string_to_metric_families(deployed)
          for s in f.samples if s.name == "slurm_up"}
    assert up == dict.fromkeys(COMMANDS, 1.0)
    for text in (checkout, deployed):
        assert check_metrics(text) == (0, "")
