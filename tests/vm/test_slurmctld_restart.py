"""The bar: jobs running while slurmctld restarts lose nothing. In the `v26` VM a busy
job and a sleeping one run, slurmctld is restarted under them (``systemctl restart``, as
an upgrade or a config change does), both end COMPLETED, each report carries the figures
an undisturbed twin of the session batch has (CPU efficiency, memory peak, samples,
findings), and the sync archives each exactly once.

A restarting slurmctld refuses sbatch, squeue and slurmrestd for a few seconds, which
would fail any other VM test asking meanwhile: this module takes the cluster's accounting
lock exclusively (``vm.alone``; tests/vm/conftest.py), after the session's VM jobs have
ended so the node is free. The fault tests of `v24` may run beside it."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from tests.helpers import stack, vm
from tests.helpers.stack import BUSY, StackJob
from tests.helpers.wait import wait_for
from webapp.archive.store import Archive

DISTURBS_CLUSTER = True  # tests/vm/conftest.py: this module takes its lock exclusively
CLUSTER = "v26"
RUN_S = 45
# Twins of the session batch's "busy" and "idle" (tests/helpers/vm.py), as long: the
# restart falls in the middle of both.
JOBS = {
    "busy": StackJob("ctld-restart-busy", "alice", ("-c1", "--mem=200M", "--time=10"),
                     BUSY.format(s=RUN_S)),
    "idle": StackJob("ctld-restart-idle", "bob", ("-c1", "--mem=200M", "--time=10"),
                     f"sleep {RUN_S}"),
}
# What waiting for a core longer than usual may add (or take): the verdicts on the CPU.
CONTENTION = {"cpu_efficiency_low", "cpu_starved"}


def _total_cpu(job_id: str) -> float:
    """The job's TotalCPU in the VM's own sacct, in seconds."""
    # The job's own line (with -X, sacct gives its allocation's, which sums no steps).
    out = vm.run(CLUSTER, "sacct", "-n", "-P", "-o", "TotalCPU", "-j", job_id).stdout
    minutes, _, seconds = out.split()[0].rpartition(":")
    hours, _, minutes = minutes.rpartition(":")
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds)


def _show(env: dict[str, str], job_id: str) -> dict[str, Any]:
    done = stack.jobreport("show", "--cluster", CLUSTER, job_id, "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _sync(env: dict[str, str]) -> str:
    done = stack.jobreport("sync", "--cluster", CLUSTER, "--no-deliver", env=env)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout


def _restart_slurmctld() -> float:
    """slurmctld restarted and answering again; the seconds that took."""
    t = time.monotonic()
    vm.run(CLUSTER, "systemctl", "restart", "slurmctld")
    wait_for(lambda: "is UP" in vm.run(CLUSTER, "scontrol", "ping", check=False).stdout,
             120, "slurmctld answering after its restart", every=1)
    return time.monotonic() - t


def test_jobs_running_through_a_slurmctld_restart_are_reported_and_archived_as_usual(
        vm_jobs, vm_env, tmp_path):
    env = {**vm_env, "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")}
    t0 = int(time.time()) - 2
    with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
        archive.advance(CLUSTER, "archive", t0)  # this test's jobs, not last week's
    with vm.alone(CLUSTER):
        ids = {name: vm.submit(CLUSTER, job) for name, job in JOBS.items()}
        for job_id in ids.values():
            vm.wait_until_running(CLUSTER, job_id)
        time.sleep(10)  # a few samples before the restart
        took = _restart_slurmctld()
        running = vm.run(CLUSTER, "squeue", "-h", "-t", "R", "-o", "%i").stdout.split()
        assert set(ids.values()) <= set(running), running  # slurmctld found them again
        states = vm.wait_until_done(CLUSTER, list(ids.values()), timeout=300)
    print(f"slurmctld restarted in {took:.1f} s; jobs: {states}")
    assert {states[j] for j in ids.values()} == {"COMPLETED"}, states
    for name, job_id in ids.items():
        report, twin = _show(env, job_id), _show(env, vm_jobs[CLUSTER][name])
        assert report["state"] == twin["state"] == "COMPLETED"
        # Accounting kept the whole run: the report's CPU time is the job's TotalCPU.
        assert report["cpu_seconds"] == pytest.approx(_total_cpu(job_id), abs=0.01), name
        assert report["cpu_seconds_source"] == twin["cpu_seconds_source"], name
        assert report["memory_peak"]["source"] == twin["memory_peak"]["source"] == "prometheus"
        assert report["memory_peak_bytes"] > 0, name
        assert (report["gaps"], report["notes"]) == (twin["gaps"], twin["notes"]) == ([], [])
        cover = report["coverage"]["nodes"][0]
        assert cover["fraction"] == 1.0 and cover["samples"] >= 5, cover  # no sample lost
        # The restart itself takes CPU time on the node: a busy job may wait for a core a
        # while longer (its CPU pressure says so), never lose time. Ran or waited through
        # its loop's wall time (``timeout``), within the job's elapsed, which adds the
        # job's start and end around the loop: seconds in an emulated guest, more on a
        # loaded host (a twin of a 30-s loop: 37 s elapsed, 31.9 s accounted).
        if name == "busy":
            vm.assert_busy_through(report, RUN_S)
            vm.assert_busy_through(twin, vm.loop_seconds("busy"))
        found, usual = ({f["name"] for f in r["findings"]} for r in (report, twin))
        assert found - usual <= CONTENTION, (name, found, usual)
        assert usual - found <= CONTENTION, (name, found, usual)
        print(f"{name} {job_id}: {report['elapsed_seconds']:.0f} s, CPU "
              f"{report['cpu_seconds']:.1f} s (efficiency {report['cpu_efficiency']:.2f}, "
              f"waited {report['usage']['cpu_pressure_seconds']:.1f} s), memory peak "
              f"{report['memory_peak_bytes']} B, {cover['samples']} samples; twin "
              f"{twin['job_id']}: {twin['elapsed_seconds']:.0f} s, efficiency "
              f"{twin['cpu_efficiency']:.2f}, waited {twin['usage']['cpu_pressure_seconds']:.1f}"
              f" s; findings {sorted(found)}")
    first = _sync(env)
    assert "stopped at" not in first, first
    _sync(env)  # once more: nothing is done twice
    with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
        rows = archive.db.query("SELECT job_id, COUNT(*) FROM archive_jobs WHERE cluster = ?"
                                " GROUP BY job_id", (CLUSTER,))
        mine = set(ids.values())
        assert {j: n for j, n in rows if j in mine} == {j: 1 for j in mine}
        logged = Counter(j for j, _, _ in archive.outcomes(CLUSTER, "archive") if j in mine)
        assert logged == {j: 1 for j in mine}
