"""The exporter on the real local stack: a running multi-process job, scraped in-process.

Needs root and the stack from scripts/dev-stack (the conftest's ``stack_env`` starts it or
fails loudly; it never skips, in CI or not). Runs in well under 60 s.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from jobs_exporter.registry import JobsCollector
from jobs_exporter.settings import Settings
from tests.helpers import stack
from tests.helpers.exporter_scrape import samples
from tests.helpers.wait import wait_for

SCRATCH = "/tmp/jobreport-scratch"
JOB_SCRIPT = f"""#!/bin/bash
mkdir -p {SCRATCH}/$SLURM_JOB_ID && cd {SCRATCH}/$SLURM_JOB_ID
python3 -c '
import threading, time
files = [open(f"f{{i}}.dat", "w") for i in range(200)]
def spin():
    end = time.time() + 45
    while time.time() < end:
        pass
threading.Thread(target=spin).start()
spin()
' &
sleep 45 &
wait
"""


def _scrape(collector: JobsCollector, job_id: str) -> dict[str, float]:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(collector)
    out = {}
    for (name, labels), value in samples(generate_latest(registry).decode()).items():
        labels = dict(labels)
        if labels.get("jobid") == job_id:
            extra = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "jobid")
            out[f"{name}{{{extra}}}" if extra else name] = value
    return out


@pytest.mark.stack
def test_running_job_is_scraped(stack_env):
    os.makedirs(SCRATCH, exist_ok=True)
    os.chmod(SCRATCH, 0o1777)
    # The script goes through stdin: alice cannot read pytest's private tmp dirs.
    submitted = subprocess.run(
        [
            "runuser",
            "-u",
            "alice",
            "--",
            "sbatch",
            "--parsable",
            "-J",
            "exporter-it",
            "-c1",
            "--mem=200M",
            "--time=2",
            "--chdir=/tmp",
            "-o",
            "/dev/null",
        ],
        input=JOB_SCRIPT,
        capture_output=True,
        text=True,
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    # Other integration tests keep the 2-CPU node busy: run this job next (admin priority;
    # priority/basic gives jobs 4294901760 less their submission order, so 4000000000
    # put the job last, not first).
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "Priority=4294967000"], check=False)
    collector = JobsCollector(  # the exporter of the node the job runs on
        Settings(scratch=(SCRATCH,), gpus="off", node_name=stack.node_of(job_id, 50)),
        user_name=lambda uid: f"uid{uid}",
    )
    try:
        first = wait_for(
            lambda: (s := _scrape(collector, job_id)).get("jobs_open_files", 0) >= 200 and s,
            50,
            f"job {job_id} running with 200 open files",
            every=0.2,
        )
        time.sleep(0.5)
        second = _scrape(collector, job_id)
    finally:
        subprocess.run(["scancel", job_id], check=False)
    assert first["jobs_processes"] >= 2
    assert first["jobs_threads"] >= 3  # python (2 threads) + bash + sleep
    assert first["jobs_open_files"] >= 200
    assert first["jobs_scratch_in_use"] == 1
    assert 0 < first["jobs_open_files_limit_ratio"] < 1
    assert first["jobs_memory_limit_bytes"] == 200 * 2**20
    assert first["jobs_cpus"] == 1
    cpu = "jobs_cpu_seconds_total{mode=user}"
    assert second[cpu] > first[cpu]
    uid = subprocess.run(["id", "-u", "alice"], capture_output=True, text=True).stdout.strip()
    assert first[f"jobs_info{{uid={uid},user=uid{uid}}}"] == 1


def _submit(script: str, *options: str) -> str:
    submitted = subprocess.run(
        ["runuser", "-u", "alice", "--", "sbatch", "--parsable", "-c1", "--mem=100M"]
        + ["--time=2", "--chdir=/tmp", "-o", "/dev/null", *options],
        input=script,
        capture_output=True,
        text=True,
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "Priority=4294967000"], check=False)
    return job_id


@pytest.mark.stack
def test_gpu_owner_from_real_scontrol_not_from_the_jobs_environment(stack_env, tmp_path):
    from jobs_exporter.nvml_replay import load_replay
    from tests.helpers.exporter_scrape import FIXTURES

    gpu_job = _submit("#!/bin/bash\nsleep 60\n", *stack.IDLE_GPU, "-J", "exporter-gpu")
    node = stack.node_of(gpu_job)
    # A CPU-only job on the same node claiming its every GPU through its own environment.
    hostile = _submit(
        "#!/bin/bash\nexport SLURM_JOB_GPUS=0-1\nexec sleep 60\n", "-J", "exporter-claim",
        "-p", "gpu", "-w", node,
    )
    settings = Settings(gpus="auto", gpu_alloc_dir=str(tmp_path), node_name=node)  # no prolog
    collector = JobsCollector(
        settings,
        nvml=load_replay(FIXTURES / "nvml" / "stack-replay.json"),
        user_name=lambda uid: f"uid{uid}",
    )
    try:
        both = wait_for(
            lambda: (a := _scrape(collector, gpu_job)).get("jobs_processes")
            and (b := _scrape(collector, hostile)).get("jobs_processes")
            and (a, b),
            90,
            f"jobs {gpu_job} and {hostile} running",
            every=0.2,
        )
        shown = subprocess.run(
            ["scontrol", "-d", "show", "job", gpu_job], capture_output=True, text=True
        ).stdout
    finally:
        subprocess.run(["scancel", gpu_job, hostile], check=False)
    index = shown.split("(IDX:", 1)[1].split(")", 1)[0]
    gpu_series, hostile_series = both
    assert f"jobs_gpu_memory_total_bytes{{gpu={index}}}" in gpu_series
    assert not [k for k in gpu_series if k.startswith("jobs_gpu_") and f"gpu={index}" not in k]
    assert not [k for k in hostile_series if k.startswith("jobs_gpu_")]


@pytest.mark.stack
def test_job_name_holding_a_gpu_line_gets_no_gpu(stack_env, tmp_path):
    """scontrol prints a name's line breaks verbatim: the name's fake detail line is text."""
    from jobs_exporter.nvml_replay import load_replay
    from tests.helpers.exporter_scrape import FIXTURES

    node = subprocess.run(
        ["sinfo", "-N", "-h", "-o", "%N"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    name = f"x\n     Nodes={node} CPU_IDs=0 Mem=100 GRES=gpu:1(IDX:0)"
    hostile = _submit("#!/bin/bash\nexec sleep 60\n", "-J", name, "-w", node)
    settings = Settings(gpus="auto", gpu_alloc_dir=str(tmp_path), node_name=node)  # scontrol
    collector = JobsCollector(
        settings,
        nvml=load_replay(FIXTURES / "nvml" / "stack-replay.json"),
        user_name=lambda uid: f"uid{uid}",
    )
    try:
        series = wait_for(
            lambda: (s := _scrape(collector, hostile)).get("jobs_processes") and s,
            300,
            f"job {hostile} running",
            every=0.2,
        )
        shown = subprocess.run(
            ["scontrol", "-d", "show", "job", hostile], capture_output=True, text=True
        ).stdout
    finally:
        subprocess.run(["scancel", hostile], check=False)
    assert shown.splitlines()[1] == name.splitlines()[1]  # the fake line is really there
    assert not [k for k in series if k.startswith("jobs_gpu_")]
