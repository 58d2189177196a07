"""The bar: a node that dies under a job is named in its report, and the sync goes on. In
the `v24` VM a busy job runs, then its node dies hard: slurmd, the job's slurmstepd and
its tasks killed with SIGKILL at once (slurmd's unit and the job's cgroup), as a node
losing power or panicking leaves them. slurmctld finds the node not responding, sets it
DOWN and the job NODE_FAIL; slurmd is started again and the node returns to service
(ReturnToService=2). The job's report says a node failed, naming the node, when and why
("Not responding"); jobs that run after it are reported as usual, and the sync archives
all of them, each once.

Slurm's default SlurmdTimeout (300 s) would hold the test five minutes: the module lowers
it to 20 s for its run (slurm.conf in the guest and ``scontrol reconfigure``, undone
however the test ends). ``scontrol update state=down`` would fail the job at once, but
that is an administrator's act, not a death: here slurmctld itself has to notice.

A down node stops every other VM test's jobs on that cluster: this module takes the
cluster's accounting lock exclusively (``vm.alone``; tests/vm/conftest.py), after the
session's VM jobs have ended, and brings the node back in a ``finally``."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.helpers import stack, vm
from tests.helpers.stack import BUSY, StackJob
from tests.helpers.wait import wait_for
from webapp.archive.store import Archive

DISTURBS_CLUSTER = True  # tests/vm/conftest.py: this module takes its lock exclusively
CLUSTER = "v24"
NODE = vm.node(CLUSTER)
CONF = "/etc/slurm/slurm.conf"
SLURMD_TIMEOUT = 20
# The job whose node dies (it would run 4 minutes) and the jobs after it. Without
# --no-requeue Slurm (JobRequeue=1, its default) would queue it again once the node is
# back: its NODE_FAIL run then stays in accounting beside the new one (sacct -D).
DOOMED = StackJob("node-fail", "alice", ("-c1", "--mem=100M", "--time=10", "--no-requeue"),
                  BUSY.format(s=240))
AFTER = StackJob("after-node-fail", "bob", ("-c1", "--mem=50M", "--time=2"), "sleep 3")
AFTER_JOBS = 3


def _config(name: str) -> str:
    out = vm.run(CLUSTER, "scontrol", "show", "config", check=False).stdout
    return next((line.split("=", 1)[1].strip() for line in out.splitlines()
                 if line.split("=", 1)[0].strip() == name), "")


def _reconfigure(timeout: str) -> None:
    """slurmctld rereads slurm.conf (24.11: it restarts itself) and answers with it."""
    vm.run(CLUSTER, "scontrol", "reconfigure", check=False)
    wait_for(lambda: _config("SlurmdTimeout") == timeout, 120,
             f"slurmctld answering with SlurmdTimeout {timeout}", every=1)


@contextmanager
def _slurmd_timeout(seconds: int) -> Iterator[None]:
    """SlurmdTimeout lowered to ``seconds`` (a line added to slurm.conf), then Slurm's
    default again; the guest's slurm.conf sets none of its own."""
    unset = f"sed -i '/^SlurmdTimeout=/d' {CONF}"
    vm.shell(CLUSTER, f"{unset} && echo SlurmdTimeout={seconds} >> {CONF}")
    try:
        _reconfigure(f"{seconds} sec")
        yield
    finally:
        vm.shell(CLUSTER, unset, check=False)
        _reconfigure("300 sec")
        # 24.11's slurmctld restarted itself to reread slurm.conf: its node reads UNKNOWN
        # until slurmd registers again. Released only then (sinfo of the next VM module
        # read "unknown" once).
        _node_back()


def _node_state() -> tuple[str, str]:
    """The node's state and reason, as sinfo prints them."""
    out = vm.run(CLUSTER, "sinfo", "-h", "-N", "-n", NODE, "-p", "debug", "-o", "%T|%E",
                 check=False).stdout
    state, _, reason = out.strip().partition("|")
    return state, reason


def _node_back() -> None:
    """slurmd running and the node taking jobs again (idempotent)."""
    vm.run(CLUSTER, "systemctl", "start", "slurmd", check=False)

    def idle() -> bool:
        if _node_state()[0].rstrip("*~#") in ("idle", "mixed", "allocated"):
            return True
        # ReturnToService=2 brings it back once slurmd registers; this if it did not.
        vm.run(CLUSTER, "scontrol", "update", f"nodename={NODE}", "state=resume", check=False)
        return False

    wait_for(idle, 120, lambda: f"{NODE} back in service: {_node_state()}", every=3)


def _kill_node(job_id: str) -> None:
    """slurmd, the job's slurmstepd and its tasks killed at once (SIGKILL)."""
    job_cgroup = f"/sys/fs/cgroup/system.slice/{NODE}_slurmstepd.scope/job_{job_id}"
    vm.shell(CLUSTER, f"systemctl kill -s KILL slurmd && echo 1 > {job_cgroup}/cgroup.kill")


def _show(env: dict[str, str], job_id: str) -> dict[str, Any]:
    done = stack.jobreport("show", "--cluster", CLUSTER, job_id, "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _sync(env: dict[str, str]) -> str:
    done = stack.jobreport("sync", "--cluster", CLUSTER, "--no-deliver", env=env)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout


def test_a_job_whose_node_dies_is_reported_node_fail_and_the_sync_goes_on(
        vm_jobs, vm_env, tmp_path):
    env = {**vm_env, "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")}
    t0 = int(time.time()) - 2
    with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
        archive.advance(CLUSTER, "archive", t0)  # this test's jobs, not last week's
    with vm.alone(CLUSTER), _slurmd_timeout(SLURMD_TIMEOUT):
        try:
            doomed = vm.submit(CLUSTER, DOOMED)
            vm.wait_until_running(CLUSTER, doomed)
            time.sleep(15)  # a few samples before the node dies
            killed = time.monotonic()
            _kill_node(doomed)
            state = vm.wait_until_done(CLUSTER, [doomed], timeout=180)[doomed]
            failed_after = time.monotonic() - killed
            down = _node_state()
        finally:
            _node_back()
        back_after = time.monotonic() - killed
        after = [vm.submit(CLUSTER, AFTER) for _ in range(AFTER_JOBS)]
        states = vm.wait_until_done(CLUSTER, after, timeout=300)
    print(f"{doomed} {state} {failed_after:.0f} s after the kill; node {down}; back in "
          f"service {back_after:.0f} s after the kill; then {states}")
    assert state == "NODE_FAIL"
    assert down[1] == "Not responding", down
    assert set(states.values()) == {"COMPLETED"}, states

    report = _show(env, doomed)
    assert report["state"] == "NODE_FAIL" and report["nodes"] == [NODE]
    found = {f["name"]: f for f in report["findings"]}
    failure = found["node_failure"]["message"]
    # The node, what became of it, and why: slurmdbd's event, read through the view.
    assert f"node {NODE} was set DOWN" in failure and '"Not responding"' in failure, failure
    assert "hardware_fault" not in found  # the event is told once, in the outcome
    events = [(e["node"], e["state"], e["reason"]) for e in report["node_events"]]
    assert any(n == NODE and st.split("+")[0] == "DOWN" and why == "Not responding"
               for n, st, why in events), events  # DOWN+NOT_RESPONDING on 24.11
    # The step's usage died with slurmstepd (sacct: TotalCPU 0): the CPU time is what the
    # job's cgroup counted until the kill, the 15 s busy at least, through Prometheus.
    assert report["cpu_seconds_source"] == "prometheus", report["cpu_seconds_source"]
    assert 10 <= report["cpu_seconds"] <= report["elapsed_seconds"], report["cpu_seconds"]
    assert report["memory_peak"]["source"] == "prometheus" and report["memory_peak_bytes"]
    print(f"report of {doomed}: {failure} (CPU {report['cpu_seconds']:.1f} s of "
          f"{report['elapsed_seconds']:.0f} s, memory peak {report['memory_peak_bytes']} B)")
    for job_id in after:
        assert _show(env, job_id)["state"] == "COMPLETED"

    first = _sync(env)
    assert "stopped at" not in first, first
    _sync(env)  # once more: nothing is done twice
    mine = {doomed, *after}
    with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
        rows = archive.db.query("SELECT job_id, COUNT(*) FROM archive_jobs WHERE cluster = ?"
                                " GROUP BY job_id", (CLUSTER,))
        assert {j: n for j, n in rows if j in mine} == {j: 1 for j in mine}
        logged = Counter(j for j, _, _ in archive.outcomes(CLUSTER, "archive") if j in mine)
        assert logged == {j: 1 for j in mine}
        assert archive.get(CLUSTER, doomed).state == "NODE_FAIL"
