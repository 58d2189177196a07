"""The VM clusters for integration tests (scripts/vm-cluster): run commands in them, submit
jobs, wait for them. Each cluster is one VM booting its own kernel on cgroup v2 under
systemd: ``v24`` (Debian 13, Slurm 24.11) and ``v26`` (Debian testing, Slurm 26.05, job
cgroups named by SLUID).

The session's VM jobs are submitted once (``session_batch``), on both clusters, when the
first VM test starts; the tests that read them wait for them.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.helpers import stack
from tests.helpers.stack import BUSY, STACK_ROOT, StackJob
from tests.helpers.wait import wait_for

CLUSTERS = ("v24", "v26")
VERSIONS = {"v24": "24.11", "v26": "26.05"}
SCRIPT = STACK_ROOT / "scripts" / "vm-cluster"


def node(cluster: str) -> str:
    return f"{cluster}n1"


def run(cluster: str, *argv: str, check: bool = True, timeout: float = 120,
        user: str | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` in the cluster's VM, as root or as ``user`` (runuser); output as text."""
    if user:
        argv = ("runuser", "-u", user, "--", *argv)
    return subprocess.run([str(SCRIPT), "exec", cluster, *argv], capture_output=True,
                          text=True, check=check, timeout=timeout)


def shell(cluster: str, script: str, **kw) -> subprocess.CompletedProcess[str]:
    return run(cluster, "bash", "-c", script, **kw)


def port(cluster: str, name: str) -> int:
    out = subprocess.run([str(SCRIPT), "port", cluster, name], capture_output=True,
                         text=True, check=True).stdout
    return int(out)


def start() -> None:
    """Boot (or find running) both VM clusters; fails loudly when one cannot start."""
    subprocess.run([str(SCRIPT), "start"], check=True, timeout=900)


def sacct(cluster: str) -> tuple[str, ...]:
    """The cluster's own sacct, run in its VM."""
    return (str(SCRIPT), "exec", cluster, "sacct")


def submit(cluster: str, job: StackJob, *extra: str) -> str:
    """sbatch in the VM as the job's user; the job id."""
    out = run(cluster, *stack.sbatch_argv(job, *extra)).stdout
    return out.strip().split(";")[0]


def ahead(cluster: str, job_id: str) -> None:
    """The job starts before the session's queued jobs (its priority raised, as root):
    a test that waits for its own job does not wait for the whole batch."""
    run(cluster, "scontrol", "update", f"jobid={job_id}", "priority=1000000")


# How often a wait asks a VM's sacct: each answer costs the emulated guest ~0.3 s of this
# machine's CPU (ssh's session, sacct, slurmdbd, MariaDB), taken from the jobs it waits
# for. Several workers waiting for the session's VM jobs at once, every second, kept the
# guests' vCPUs busy beside the jobs being judged.
DONE_EVERY, RUNNING_EVERY = 5.0, 2.0


def wait_until_done(cluster: str, job_ids: list[str], timeout: float = 900) -> dict[str, str]:
    """Every job in a final state, read with the cluster's sacct every ``DONE_EVERY``
    seconds; a sacct that fails (its slurmdbd stopped by ``slurmdbd_stopped``) is asked
    again."""
    current: dict[str, str] = {}

    def done() -> bool:
        try:
            current.clear()
            current.update(stack.states(job_ids, sacct(cluster)))
        except subprocess.CalledProcessError:
            return False
        return all(stack._done(j, current) for j in job_ids)

    wait_for(done, timeout, lambda: f"jobs not finished on {cluster}: {current}",
             every=DONE_EVERY)
    return current


def wait_until_running(cluster: str, job_id: str, timeout: float = 300) -> None:
    stack.wait_until_running(job_id, timeout, sacct(cluster), every=RUNNING_EVERY)


# Waits a job's tasks live through, on cgroup v2's pressure files (PSI). Both run on the
# VMs' scratch file system, a disk QEMU throttles as a busy shared one is: the guest's own
# disk answers at memory speed, so nothing would ever wait on it.
# The writes are direct overwrites of blocks already on disk: the task itself waits for
# each one (io_schedule, counted as I/O pressure). An appending write + fsync waits for the
# journal's commit too, which the kernel counts as a plain sleep: how much of the run PSI
# then shows depends on how the journal thread was scheduled (under load, 5 % once).
DIRECT_WRITES = ("python3 -c 'import mmap, os, random, time\n"
                 "path = \"/scratch/io-sync.%d\" % os.getpid()\n"
                 "f = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)\n"
                 "block = mmap.mmap(-1, 4096)\n"
                 "block.write(b\"x\" * 4096)\n"
                 "for i in range(64):\n"
                 "    os.pwritev(f, [block], i * 4096)\n"
                 "os.fsync(f)\n"
                 "end = time.time() + {s}\n"
                 "while time.time() < end:\n"
                 "    os.pwritev(f, [block], random.randrange(64) * 4096)\n"
                 "os.unlink(path)'")
# A file a third larger than the job's memory limit, its pages touched at random through a
# mapping: its working set reclaimed under the limit and faulted back from the slow disk.
THRASH = ("f=/scratch/thrash.$SLURM_JOB_ID; "
          "dd if=/dev/zero of=$f bs=1M count=64 oflag=direct status=none; "
          "python3 -c 'import mmap, random, sys, time\n"
          "f = open(sys.argv[1], \"rb\")\n"
          "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
          "end, n, s = time.time() + {s}, len(m), 0\n"
          "while time.time() < end:\n"
          "    for _ in range(500):\n"
          "        s += m[random.randrange(n)]' $f; rm -f $f")
LOOPS = "for i in $(seq {n}); do timeout {s} sh -c 'while :; do :; done' & done; wait; exit 0"


# The VM clusters' session jobs: the labelled jobs that fit a 2-CPU, 1.5 GiB node, and the
# waits cgroup v2 shows (PSI) with their quiet twins.
VM_JOBS: tuple[StackJob, ...] = (
    # The jobs whose verdict needs a quiet node first, each beside nothing busier than a
    # sleep, the batch's other jobs after them (``after``). The starving pair of the shared
    # partition (OverSubscribe=FORCE) may be given their cores, and the OOM kill's and the
    # thrashing job's reclaim run on any core: beside them "busy" waited for a CPU 25-27 %
    # of its run, and "io-sync" 35 %, more than for storage (run ea, both clusters: judged
    # idle, not I/O-bound), as each job beside another busy one did (oom 35 %). The guest's
    # two CPUs are one host thread (TCG). (--exclusive would keep them away too, but then
    # a one-core job holds, and is judged on, both cores.)
    # The twins run 45 s: a job shows in the guest's cgroups 2-8 s after Slurm's start, and
    # the first scrape to see it comes up to an interval later; past two intervals without
    # a sample the start counts as a gap (a CI run: v26's "busy" seen from ~13 s of its
    # 35, 78 % covered, under the 80 % its verdicts need): ~50 s hold 80 % to a first at 15 s.
    StackJob("busy", "alice", ("-c1", "--mem=200M", "--time=10"), BUSY.format(s=45)),
    StackJob("idle", "bob", ("-c1", "--mem=200M", "--time=10"), "sleep 45"),
    StackJob("io-sync", "bob", ("-c1", "--mem=200M", "--time=10"), DIRECT_WRITES.format(s=30),
             after="busy"),
    StackJob("two-cpus-one-used", "alice", ("-c2", "--mem=200M", "--time=10"),
             BUSY.format(s=25), after="io-sync"),
    StackJob("oom", "alice", ("-c1", "--mem=100M", "--time=10"),
             "python3 -c 'b = [bytearray(2**20) for _ in range(400)]'",
             after="two-cpus-one-used"),
    StackJob("mem-reclaim", "bob", ("-c1", "--mem=48M", "--time=10"), THRASH.format(s=30),
             after="two-cpus-one-used"),
    # Two jobs sharing both cores of the node (partition shared: OverSubscribe=FORCE):
    # each starved by the other.
    StackJob("starved", "alice", ("-p", "shared", "-c2", "--mem=100M", "--time=10"),
             LOOPS.format(n=2, s=30), after="two-cpus-one-used"),
    StackJob("starver", "bob", ("-p", "shared", "-c2", "--mem=100M", "--time=10"),
             LOOPS.format(n=2, s=30), after="two-cpus-one-used"),
)


def loop_seconds(name: str) -> int:
    """The wall time of a session job's busy loop (``BUSY``'s ``timeout``)."""
    script = next(j.script for j in VM_JOBS if j.name == name)
    return int(script.split()[1])


def assert_busy_through(report: dict[str, Any], loop: float) -> None:
    """A busy job's JSON report ran or waited for a core through its loop's wall time: its
    CPU seconds and CPU-pressure seconds add up to the loop, within the job's elapsed,
    which adds the job's start and end around it (seconds in an emulated guest)."""
    accounted = report["cpu_seconds"] + report["usage"]["cpu_pressure_seconds"]
    assert loop * 0.95 <= accounted <= report["elapsed_seconds"] + 2, \
        (report["job_id"], accounted, loop, report["elapsed_seconds"])


def session_batch() -> dict[str, dict[str, str]]:
    """``VM_JOBS`` submitted once per test session on every VM cluster (whichever worker
    asks first; the others read the ids it wrote); cluster -> name -> job id."""
    return stack.once_per_session(
        STACK_ROOT / "var" / "vm", "test-batch",
        lambda: {c: stack.submit_batch(VM_JOBS, functools.partial(submit, c))
                 for c in CLUSTERS})


# Each cluster has its own accounting lock. A test that stops a VM's slurmdbd or disturbs
# its other daemons holds that cluster's exclusively (``slurmdbd_stopped``, ``alone``);
# every other VM test module holds both shared while it runs (tests/vm/conftest.py), so
# under xdist none of them asks sacct, slurmrestd or sacctmgr meanwhile, while a fault
# test on one cluster runs beside one on the other (they were ~300 s in a row).
LOCK_DIR = STACK_ROOT / "var" / "vm"


def disturbs(module: object) -> bool:
    """Whether a VM test module takes its cluster's lock exclusively in its test (it stops
    slurmdbd, ``STOPS_SLURMDBD``, or disturbs other daemons, ``DISTURBS_CLUSTER``)."""
    return bool(getattr(module, "STOPS_SLURMDBD", False)
                or getattr(module, "DISTURBS_CLUSTER", False))


@contextmanager
def _flock(cluster: str, how: int) -> Iterator[None]:
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_DIR / f"accounting-{cluster}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, how)  # blocks until the holders of the other kind are done
        yield
    finally:
        os.close(fd)


@contextmanager
def accounting_in_use() -> Iterator[None]:
    """Held by a module that reads the VMs' accounting (shared with other such modules),
    on every cluster; taken in ``CLUSTERS``' order, so two holders never wait in a ring."""
    with contextlib.ExitStack() as held:
        for cluster in CLUSTERS:
            held.enter_context(_flock(cluster, fcntl.LOCK_SH))
        yield


def alone(cluster: str) -> contextlib.AbstractContextManager[None]:
    """Held by a test that disturbs ``cluster``'s daemons (slurmctld restarted, a node
    down): no other VM module submits jobs or asks the clusters meanwhile, but a test
    disturbing the other cluster may run beside it."""
    return _flock(cluster, fcntl.LOCK_EX)


@contextmanager
def slurmdbd_stopped(cluster: str) -> Iterator[None]:
    """The cluster's slurmdbd stopped (slurmctld queues the records meanwhile), alone
    among the VM tests of that cluster; started again, and answering, however the block
    ends."""
    with alone(cluster):
        run(cluster, "systemctl", "stop", "slurmdbd")
        try:
            yield
        finally:
            start_slurmdbd(cluster)


def start_slurmdbd(cluster: str) -> None:
    """slurmdbd started and answering sacctmgr (idempotent)."""
    run(cluster, "systemctl", "start", "slurmdbd")
    wait_for(lambda: run(cluster, "sacctmgr", "-n", "show", "cluster", check=False)
             .returncode == 0, 120, f"{cluster}'s slurmdbd answering", every=1)
