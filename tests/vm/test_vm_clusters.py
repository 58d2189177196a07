"""The VM clusters live: Slurm 24.11 and 26.05 on cgroup v2 under systemd, each answering
its own commands, its jobs in the cgroup layout of its version, exported by the project's
jobs-exporter (installed in the VM from the wheel), scraped by the stack's Prometheus with
a ``cluster`` label, and reported by the host's ``jobreport`` through its slurmrestd."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import requests

from tests.helpers import stack, vm
from tests.helpers.stack import StackJob
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.parametrize("cluster", vm.CLUSTERS)


def test_sinfo_answers_and_the_version_is_the_clusters(vm_env, cluster):
    rows: list[list[str]] = []

    def in_service() -> bool:
        out = vm.run(cluster, "sinfo", "-h", "-N", "-o", "%N %P %T").stdout.split("\n")
        rows[:] = [line.split() for line in out if line]
        # completing: a neighbouring test's job ending on the node
        return bool(rows) and all(re.match(r"(idle|mixed|allocated|planned|completing)",
                                           r[2]) for r in rows)

    # unknown for a few seconds after a neighbouring module restarted slurmctld, until
    # slurmd registers again
    wait_for(in_service, 60, lambda: f"{cluster}'s node in service: {rows}", every=2)
    assert {r[0] for r in rows} == {vm.node(cluster)}
    assert {r[1].rstrip("*") for r in rows} == {"debug", "shared"}
    assert vm.VERSIONS[cluster] in vm.run(cluster, "scontrol", "--version").stdout
    # cgroup v2 alone (no v1 hierarchy), with the controllers Slurm constrains.
    controllers = vm.run(cluster, "cat", "/sys/fs/cgroup/cgroup.controllers").stdout.split()
    assert {"cpu", "cpuset", "memory", "io", "pids"} <= set(controllers)
    assert vm.run(cluster, "stat", "-f", "-c", "%T", "/sys/fs/cgroup").stdout.strip() == "cgroup2fs"


def _job_cgroup(cluster: str) -> tuple[str, str]:
    """(job id, /proc/self/cgroup of its batch script) of a fresh job."""
    job = StackJob("cgroup-path", "alice", ("-c1", "--mem=100M", "--time=2"),
                   "cat /proc/self/cgroup > /tmp/cgroup-path.$SLURM_JOB_ID")
    job_id = vm.submit(cluster, job)
    vm.ahead(cluster, job_id)
    vm.wait_until_done(cluster, [job_id], timeout=900)
    return job_id, vm.run(cluster, "cat", f"/tmp/cgroup-path.{job_id}").stdout.strip()


def test_a_jobs_cgroup_is_in_its_versions_layout(vm_env, cluster):
    job_id, line = _job_cgroup(cluster)
    scope = f"/system.slice/{vm.node(cluster)}_slurmstepd.scope/"
    assert line.startswith("0::" + scope), line
    job_dir = line[len("0::" + scope):].split("/")[0]
    if cluster == "v24":
        assert job_dir == f"job_{job_id}"
    else:  # Slurm 26.05: the job's directory is its SLUID; the id is nowhere in the path
        assert re.fullmatch(r"s[0-9A-Z]{13}", job_dir), job_dir
        # (as a name of its own: a short id's digits may well occur in a SLUID)
        parts = line.replace(scope, "").split("/")
        assert job_id not in parts and f"job_{job_id}" not in parts, line
    assert line.endswith("/step_batch/user/task_0")


def _exposition(cluster: str) -> str:
    return requests.get(f"http://127.0.0.1:{vm.port(cluster, 'exporter')}/metrics",
                        timeout=30).text


def test_the_exporter_exports_a_running_job_under_its_id(vm_env, cluster):
    """On 26.05 the job's cgroup directory carries no job id: the exporter still names it."""
    # Two srun steps at once: per-step series are exported for jobs with several.
    step = "srun -n1 --exact --mem=80M timeout 60 sh -c 'while :; do :; done'"
    job = StackJob("exported", "bob", ("-n2", "-c1", "--mem=200M", "--time=3"),
                   f"{step} & {step} & wait; exit 0")
    job_id = vm.submit(cluster, job)
    try:
        vm.ahead(cluster, job_id)
        vm.wait_until_running(cluster, job_id, timeout=900)
        # Both steps: one may start seconds after the other on a loaded emulated node.
        steps = [f'jobs_step_cpu_seconds_total{{jobid="{job_id}",mode="user",step="{i}"}}'
                 for i in ("0", "1")]

        def with_both_steps() -> str | None:
            text = _exposition(cluster)
            return text if all(s in text for s in steps) else None

        text = wait_for(with_both_steps, 120, f"{steps} exported", every=2)
        assert f'jobs_info{{jobid="{job_id}",uid=' in text, text[-2000:]
        for metric in ("jobs_cpu_seconds_total", "jobs_memory_rss_bytes",
                       "jobs_memory_shmem_bytes", "jobs_pressure_waiting_seconds_total",
                       "jobs_memory_limit_bytes"):
            assert re.search(rf'^{metric}{{jobid="{job_id}"', text, re.M), metric
        # Per-step series: each srun step's own cgroup.
        for step_id in ("0", "1"):
            assert re.search(rf'^jobs_step_cpu_seconds_total{{jobid="{job_id}",'
                             rf'mode="user",step="{step_id}"}}', text, re.M), text[-3000:]
        assert not re.search(r'^jobs_exporter_unreadable_cgroups\{[^}]*\} [1-9]', text, re.M)
        pid = "$(pgrep -u bob -f 'while :' | head -1)"
        cgroup = vm.shell(cluster, f"cat /proc/{pid}/cgroup").stdout
        if cluster == "v26":
            assert f"job_{job_id}" not in cgroup and "/s" in cgroup, cgroup
    finally:
        vm.run(cluster, "scancel", job_id, check=False)


def test_prometheus_holds_the_clusters_series_under_its_label(vm_jobs, vm_env, cluster):
    url = vm_env["JOBREPORT_PROMETHEUS_URL"]
    busy = vm_jobs[cluster]["busy"]
    answer = requests.get(f"{url}/api/v1/query", timeout=30, params={
        "query": f'max_over_time(jobs_info{{cluster="{cluster}",jobid="{busy}"}}[1h])'}).json()
    result = answer["data"]["result"]
    # one node (a series per label set: a restarted exporter may add one)
    assert {r["metric"]["instance"] for r in result} == {vm.node(cluster)}, answer
    # the cluster's slurm-exporter answered under its label: over the hour, as jobs_info
    # above (an instant query finds nothing while a neighbour's fault test holds the
    # VM's slurmctld down: the scrape times out and its series go stale)
    slurm = requests.get(f"{url}/api/v1/query", timeout=30, params={
        "query": f'max_over_time(slurm_up{{cluster="{cluster}"}}[1h])'}).json()["data"]["result"]
    assert slurm and all(r["value"][1] == "1" for r in slurm), slurm


def test_a_cpu_bound_job_gets_a_json_report_from_the_host(vm_jobs, vm_env, cluster):
    """The bar: ``jobreport show --cluster CLUSTER ID --format json`` on the host, with
    samples on the job's node and a CPU-pressure figure (cgroup v2's PSI)."""
    job_id = vm_jobs[cluster]["busy"]
    done = stack.jobreport("show", "--cluster", cluster, job_id, "--format", "json", env=vm_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["job_id"] == job_id and report["cluster"] == cluster
    assert report["user"] == "alice" and report["state"] == "COMPLETED"
    nodes = {n["label"]: n for n in report["coverage"]["nodes"]}
    assert set(nodes) == {vm.node(cluster)}
    assert nodes[vm.node(cluster)]["samples"] >= 3, nodes
    assert report["usage"]["cpu_pressure_seconds"] is not None
    # Busy through its loop's wall time, on a core or waiting for one: the efficiency
    # itself falls with the host's load, which starves the emulated CPU and stretches the
    # job's start and end in the guest (a CI run: 0.497).
    loop, cpu = vm.loop_seconds("busy"), report["cpu_seconds"]
    vm.assert_busy_through(report, loop)
    assert cpu >= 0.5 * loop, cpu
    assert report["cpu_efficiency"] == pytest.approx(cpu / report["elapsed_seconds"]), report
    # The text report's next command names the cluster it was asked for.
    shown = stack.jobreport("show", "--cluster", cluster, job_id, env=vm_env)
    assert shown.returncode == 0, shown.stderr
    assert f"More: jobreport show {job_id} --cluster {cluster} --details" in shown.stdout


def test_qemu_listens_on_the_loopback_only(vm_env, cluster):
    pid = (stack.STACK_ROOT / "var" / "vm" / cluster / "qemu.pid").read_text().strip()
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    mine = [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]
    assert len(mine) >= 5, out
    assert all(addr.startswith("127.0.0.1:") for addr in mine), mine


def test_the_report_is_the_same_through_slurmrestd_and_the_vms_sacct(vm_jobs, vm_env, cluster):
    """The cluster's jobs come through its slurmrestd (sacct on the host cannot talk to its
    daemons); the same job read through ``sacct`` run inside the VM gives the same report."""
    import dataclasses

    from webapp.report.service import ReportService
    from webapp.settings import Settings

    rest = Settings.from_env(vm_env).for_cluster(cluster)
    assert rest.sacct_source == "slurmrestd"
    cli = dataclasses.replace(rest, sacct_source="sacct")  # var/vm/<cluster>/bin/sacct
    for name in ("busy", "two-cpus-one-used", "oom"):
        job_id = vm_jobs[cluster][name]
        a = ReportService(rest).build(job_id, sizing=False)
        b = ReportService(cli).build(job_id, sizing=False)
        fields = ("user", "account", "partition", "job_name", "state", "exit_code", "nodes",
                  "cpus", "submit_time", "start_time", "end_time", "elapsed_seconds",
                  "time_limit_seconds", "memory_requested_bytes", "cpu_seconds",
                  "memory_peak")
        differ = {f: (getattr(a, f), getattr(b, f)) for f in fields
                  if getattr(a, f) != getattr(b, f)}
        assert not differ, (name, differ)
        assert a.cpu_efficiency == b.cpu_efficiency, name
        assert [f.name for f in a.findings] == [f.name for f in b.findings], name
