"""The real local stack for integration tests: start it, submit jobs, wait for them.

All integration jobs are submitted together once per test session (see conftest's
``stack_jobs``) so the cluster works on them in parallel while other tests run.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from tests.helpers.wait import wait_for
from webapp.states import ENDED_STATES

if TYPE_CHECKING:
    import requests

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
# A second checkout (a git worktree) may test against the stack another checkout runs.
STACK_ROOT = Path(os.environ.get("JOBREPORT_TEST_STACK_ROOT") or ROOT)
ENV_FILE = STACK_ROOT / "var" / "jobreport.env"
FINAL_STATES = frozenset(ENDED_STATES)

# sbatch --wrap runs /bin/sh: a busy loop bounded by timeout(1), whose 124 is not a failure.
BUSY = "timeout {s} sh -c 'while :; do :; done'; exit 0"


# One GPU of the stack's idle model (the replayed Tesla T4 of node gpu1; gpu2's H100
# replays a reading under load): what a job that never touches its GPU asks for.
IDLE_GPU = ("-p", "gpu", "--gres=gpu:t4:1")

# A CPU job of a module's own on a GPU node the session's batch leaves free (gpu3, gpu4:
# their GPU tests come minutes later): in debug it waited behind the batch's ~700
# core-seconds, 76-142 s at the session's start, holding its worker meanwhile.
def off_debug(node: str) -> tuple[str, ...]:
    return ("-p", "gpu", "-w", node)

HOSTILE_MARKUP = "<script>alert(1)</script> \\input{/etc/passwd} $&%#_{}~^\\"
HOSTILE_HEADER = "report\r\nBcc: evil@example.org"
LATIN1_NAME = b"caf\xe9-latin1"  # one Latin-1 byte: not valid UTF-8


@dataclass(frozen=True)
class StackJob:
    """A real job the integration tests submit: who, what resources, which script."""

    name: str
    user: str
    args: tuple[str, ...]
    script: str
    job_name: str | None = None  # what -J gets, when not ``name`` (hostile names)
    after: str | None = None  # a job of the same batch this one starts after (its end)


# One entry per behaviour the report must recognise (issue tests name each of them).
STACK_JOBS: tuple[StackJob, ...] = (
    StackJob("busy", "alice", ("-c1", "--mem=500M", "--time=10"), BUSY.format(s=30)),
    StackJob("idle", "bob", ("-c1", "--mem=500M", "--time=10"), "sleep 30"),
    StackJob("two-cpus-one-used", "alice", ("-c2", "--mem=500M", "--time=10"), BUSY.format(s=20)),
    StackJob(
        "mem-over-request",
        "bob",
        ("-c1", "--mem=4G", "--time=10"),
        "python3 -c 'b = bytearray(300 * 2**20); import time; time.sleep(20)'",
    ),
    StackJob(
        "oom",
        "alice",
        ("-c1", "--mem=100M", "--time=10"),
        "python3 -c 'b = [bytearray(2**20) for _ in range(400)]'",
    ),
    StackJob(
        "gpu-untouched", "bob", ("-c1", "--mem=500M", *IDLE_GPU, "--time=10"), "sleep 20"
    ),
    StackJob("short", "alice", ("-c1", "--mem=500M", "--time=10"), "sleep 1"),
    # Untrusted text: HTML and LaTeX in one name, a mail header in the other.
    StackJob("hostile-markup", "bob", ("-c1", "--mem=500M", "--time=10"), "sleep 12",
             job_name=HOSTILE_MARKUP),
    StackJob("hostile-header", "bob", ("-c1", "--mem=500M", "--time=10"), "sleep 12",
             job_name=HOSTILE_HEADER),
    # An array whose tasks hold 50, 100, 150 and 200 MiB: the summary suggests one --mem.
    StackJob(
        "array",
        "alice",
        ("-c1", "--mem=1G", "--time=10", "--array=1-4"),
        "python3 -c 'import os, time\n"
        "b = bytearray(int(os.environ[\"SLURM_ARRAY_TASK_ID\"]) * 50 * 2**20)\n"
        "time.sleep(6)'",
    ),
    # `srun -n2` on one node, each task holding 200 MiB: sacct's MaxRSS is one task, the
    # job held both. -N1: without it Slurm split the tasks over two nodes with a core free
    # each once (run n), and the job read as two nodes, one idle.
    StackJob(
        "multi-task",
        "alice",
        ("-N1", "-n2", "-c1", "--mem=4G", "--time=10"),
        "srun python3 -c 'b = bytearray(200 * 2**20); import time; time.sleep(20)'",
    ),
    # One long-lived process: per-process I/O counters vanish with short-lived children.
    StackJob(
        "small-files",
        "bob",
        ("-c1", "--mem=500M", "--time=10"),
        "python3 -c 'import os, time\n"
        "os.makedirs(\"many\", exist_ok=True)\n"
        "for i in range(3000):\n"
        "    open(f\"many/f{i}\", \"w\").write(\"x\" * 4000)\n"
        "time.sleep(15)'; rm -rf many",
    ),
    # Resident memory climbing ~8 MB/s for 40 s toward a 500M limit: a leak's shape.
    # bytes(...) * n writes every page (a zeroed bytearray may not be resident yet). 40 s
    # give the fit 6-7 points at 5 s (it needs 5): in 30 s the series' first and last
    # scrapes left 5, and a start scraped late 4.
    StackJob(
        "mem-growth",
        "alice",
        ("-c1", "--mem=500M", "--time=10"),
        "python3 -c 'import time\n"
        "chunks, end = [], time.time() + 40\n"
        "while time.time() < end:\n"
        "    chunks.append(b\"x\" * (2 * 2**20))\n"
        "    time.sleep(0.25)'",
    ),
    # One core saturated beside a GPU (the stack's replayed GPUs hold 1 GiB and do no
    # work): the input pipeline starving the GPU.
    StackJob(
        "gpu-input-bound",
        "bob",
        ("-c1", "--mem=500M", *IDLE_GPU, "--time=10"),
        BUSY.format(s=25),
        # Not beside `busy`: the nodes share the machine's cores, and a one-core job's
        # core is the first on every node: two one-core loops would halve each other.
        after="busy",
    ),
    # Two srun steps: 20 s on two cores, one of them busy for the first 2 s only, then both
    # cores busy for 14 s. The report lists each step and the CPU finding names step 0,
    # which left most cores idle. The job's ~0.44 efficiency sits below the CPU threshold
    # however much CPU the machine gives step 1; a step 0 busy throughout made ~0.64, and
    # the finding flipped with load. Step 1 lasts three scrapes: the exporter counts a
    # thread busy from its second scrape on, so its two threads must be seen twice to rule
    # serial out (at 8 s, under load, one scrape saw one of them and the job read serial).
    StackJob(
        "steps",
        "alice",
        ("-c2", "--mem=500M", "--time=10"),
        "srun -c2 sh -c 'timeout 2 sh -c \"while :; do :; done\"; sleep 18; exit 0'\n"
        "srun -c2 sh -c '(timeout 14 sh -c \"while :; do :; done\") & "
        "timeout 14 sh -c \"while :; do :; done\"; wait; exit 0'",
    ),
    # An idle job whose first half of samples the coverage test deletes from Prometheus
    # (its own jobid only): no other test reads its series (the bulk test leaves it out).
    StackJob("coverage-half", "bob", ("-c1", "--mem=500M", "--time=10"), "sleep 30"),
    # A GiB written to /dev/shm and held 25 s under 1500M: files in memory, charged to the
    # job as shared memory, which cgroup v1's MaxRSS leaves out (deleted on exit).
    StackJob("shm", "alice", ("-c1", "--mem=1500M", "--time=10"),
             'f=/dev/shm/jobreport-$SLURM_JOB_ID; trap "rm -f $f" EXIT; '
             "dd if=/dev/zero of=$f bs=1M count=1024 status=none; sleep 25"),
    # 440 MiB written to a file and read back under 500M: page cache near the limit, which
    # the kernel drops before it kills anything (not near the limit).
    StackJob("page-cache", "bob", ("-c1", "--mem=500M", "--time=10"),
             'f=page-cache-$SLURM_JOB_ID; trap "rm -f $f" EXIT; '
             "dd if=/dev/zero of=$f bs=1M count=440 status=none; cat $f > /dev/null; "
             "sleep 20; cat $f > /dev/null"),
)


# Jobs of single modules that read them only once ended: in the batch too, so the cluster
# runs them beside the rest instead of after it.
# sacct's own answers (tests/stack/test_sacct_live.py): steps with exit codes, a failed job,
# an array.
STACK_JOBS += (
    StackJob("sacct-steps", "alice", ("-c1", "--mem=100M", "--time=5"),
             "srun true; srun sh -c 'exit 2'; exit 0"),
    StackJob("sacct-exit3", "alice", ("-c1", "--mem=100M", "--time=5"), "exit 3"),
    StackJob("sacct-array", "bob", ("-c1", "--mem=100M", "--time=5", "--array=1-3"),
             "sleep $SLURM_ARRAY_TASK_ID"),
    # Named with a byte that is not UTF-8 (tests/stack/test_security.py): os.fsdecode keeps
    # it as a surrogate, which subprocess turns back into the same byte for sbatch.
    StackJob("latin1-job", "alice", ("-c1", "--mem=100M", "--time=5"), "sleep 2",
             job_name=os.fsdecode(LATIN1_NAME)),
    StackJob("latin1-array", "alice", ("-c1", "--mem=100M", "--time=5", "--array=1-2"),
             "sleep 2", job_name=os.fsdecode(LATIN1_NAME)),
    # A name with a line break and a "|" (tests/stack/test_sacct_linebreaks.py).
    StackJob("linebreak", "alice", ("-c2", "--mem=300M", "--time=5"),
             "srun python3 -c 'b = bytearray(100 * 2**20); import time; time.sleep(3)'",
             job_name="two\nlines|pipe"),
)

# The cluster of several nodes (tests/stack/test_cluster_nodes.py, test_staff_report_live.py).
# Each srun task holds (1 + its rank) x 100 MiB and keeps ~0.2 cores busy, or sleeps
# holding nothing: writing 200 MiB took the idle rank 0.36 CPU-seconds on a loaded host,
# 1.7 % of a core over its 21-s run, and node_idle's line is 1 %.
RANKS = ("srun python3 -c 'import os, time\n"
         "rank = int(os.environ[\"SLURM_PROCID\"])\n"
         "b = b\"x\" * (0 if rank in ({idle}) else (1 + rank) * 100 * 2**20)\n"
         "end = time.time() + 20\n"
         "while time.time() < end:\n"
         "    if rank in ({idle}): time.sleep(1); continue\n"
         "    sum(range(200000)); time.sleep(0.01)'")
STACK_JOBS += (
    StackJob("two-node", "alice", ("-N2", "--ntasks-per-node=1", "-c1", "--mem=500M",
                                   "--time=5"), RANKS.format(idle="")),
    StackJob("two-node-one-idle", "bob", ("-N2", "--ntasks-per-node=1", "-c1", "--mem=500M",
                                          "--time=5"), RANKS.format(idle="1,")),
    # -N2 -n2, each rank a busy loop: parallel however slowed, never "serial".
    StackJob("two-node-busy", "alice", ("-N2", "--ntasks-per-node=1", "-c1", "--mem=200M",
                                        "--time=5"),
             "srun sh -c \"" + BUSY.format(s=20) + "\""),
    # A heterogeneous job: one core on one node, two on another; one srun over both.
    StackJob("het", "alice", ("-c1", "--mem=100M", "--time=5", ":", "-c2", "--mem=200M",
                              "--time=5"), "srun --het-group=0,1 sleep 12"),
    # A GPU of the other model (its replayed H100 is busy), and one GPU on each GPU node.
    StackJob("gpu-h100", "bob", ("-c1", "--mem=200M", "-p", "gpu", "--gres=gpu:h100:1",
                                 "--time=5"), "sleep 20"),
    StackJob("gpu-spread", "alice", ("-N2", "--ntasks-per-node=1", "-c1", "--mem=200M",
                                     "-p", "gpu", "--gres=gpu:1", "--time=5"), "srun sleep 15"),
)

# History and right-sizing: ten jobs of one name (unique per test session, so the history
# holds only these) whose peaks are 50, 100, ..., 500 MiB, each held for two scrapes.
# One test session: pytest-xdist's run id, shared by its workers; else this process's start.
SESSION = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"{int(time.time())}-{os.getpid()}"
SIZING_NAME = f"sizing-{SESSION[:12]}"
SIZING_MIB = tuple(50 * n for n in range(1, 11))
STACK_JOBS += tuple(
    StackJob(f"sizing-{mib}", "alice", ("-c1", "--mem=1G", "--time=5"),
             f"python3 -c 'import time; b = bytearray({mib} * 2**20); time.sleep(10)'",
             job_name=SIZING_NAME)
    for mib in SIZING_MIB
)


def load_env(path: Path = ENV_FILE) -> dict[str, str]:
    """The settings dev-stack wrote (``export NAME=value`` lines)."""
    env = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[7:].partition("=")
            env[key] = value
    return env


def start_stack() -> None:
    # Test-only variables are no settings of the stack's own jobreport (it may refuse them).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("JOBREPORT_TEST_") and k != "JOBREPORT_CONFIG"}
    subprocess.run([str(STACK_ROOT / "scripts" / "dev-stack"), "start"], check=True, env=env)


# The session batch yields to every job submitted after it (Slurm's ``--nice``; the
# stack's priority/basic otherwise starts jobs in submission order): the modules with
# jobs of their own run while it does, where they queued behind its tail before
# (measured: `demo-sync-idle`, `chat-1` and `exporter-restart` pending 86-101 s on the
# debug nodes while the machine idled at 5-30 %). The modules that read the batch come
# last, well after it has ended.
BATCH_NICE = "--nice=1000"


def session_batch() -> dict[str, str]:
    """``STACK_JOBS`` submitted once per test session, whichever worker asks first (the
    others read the ids it wrote, under a lock), at ``BATCH_NICE``; name -> job id."""
    return once_per_session(STACK_ROOT / "var" / "dev-stack", "test-batch",
                            lambda: submit_batch(STACK_JOBS, lambda job, *extra:
                                                 submit(job, BATCH_NICE, *extra)))


def once_per_session(state: Path, name: str, make: Callable[[], T]) -> T:
    """``make()`` run once per test session, by whichever worker asks first; the others
    read what it returned (JSON in ``state``, written under a lock)."""
    import fcntl
    import json

    state.mkdir(parents=True, exist_ok=True)
    ids_file = state / f"{name}-{SESSION}.json"
    with open(state / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ids_file.exists():
            return json.loads(ids_file.read_text())
        for old in state.glob(f"{name}-*.json"):
            old.unlink()  # earlier sessions'
        made = make()
        ids_file.write_text(json.dumps(made))
        return made


def login(base: str, user: str) -> requests.Session:
    """A signed-in session of the stack's web app at ``base``, through its login form
    (the demo users share the password in var/demo-password)."""
    import requests

    from tests.helpers.web import http_login

    password = (STACK_ROOT / "var" / "demo-password").read_text().strip()
    session = requests.Session()
    answer = http_login(base, user, password, session, timeout=30)
    assert answer.status_code == 302 and "/login" not in answer.headers["Location"], \
        answer.headers.get("Location")
    return session


def submit_batch(jobs: tuple[StackJob, ...],
                 sbatch: Callable[..., str] | None = None) -> dict[str, str]:
    """Submit every job at once (in order, each ``after`` its named predecessor) with
    ``sbatch(job, *extra)`` (this stack's ``submit``, or a VM cluster's); name -> id."""
    sbatch = sbatch or submit
    ids: dict[str, str] = {}
    for job in jobs:
        ids[job.name] = sbatch(job, *(("--dependency", f"afterany:{ids[job.after]}")
                                      if job.after else ()))
    return ids


def submit(job: StackJob, *extra: str) -> str:
    """sbatch as the job's user (``extra`` sbatch options first); returns the job id."""
    out = subprocess.run(sbatch_argv(job, *extra), check=True, capture_output=True,
                         text=True).stdout
    return out.strip().split(";")[0]


def sbatch_argv(job: StackJob, *extra: str) -> list[str]:
    """The command that submits ``job`` as its user (``extra`` sbatch options first)."""
    return [
        "runuser",
        "-u",
        job.user,
        "--",
        "sbatch",
        "--parsable",
        "-J",
        job.job_name or job.name,
        "--chdir",
        f"/home/{job.user}",
        "-o",
        "/dev/null",
        *extra,
        *job.args,
        "--wrap",
        job.script,
    ]


def states(job_ids: list[str], sacct: tuple[str, ...] = ("sacct",)) -> dict[str, str]:
    """Current allocation state of each job from sacct (``CANCELLED by 0`` -> CANCELLED).

    "" while slurmdbd knows a job only from its steps: its allocation line is then a
    placeholder (name ``allocation``, no partition), and may stay one for a moment after
    the job's end reached slurmdbd, before the job's own record does."""
    out = subprocess.run(
        [*sacct, "-X", "-n", "-P", "--format=JobID,Partition,State", "-j", ",".join(job_ids)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = {}
    for line in out.splitlines():
        jid, partition, state = (line.split("|", 2) + ["", ""])[:3]
        result[jid] = state.split()[0] if state and partition else ""
    return result


def _done(job_id: str, current: dict[str, str]) -> bool:
    """An array counts as done when every task (``123_4`` lines) is in a final state, a
    heterogeneous job when every component (``123+1``) is."""
    mine = [state for jid, state in current.items()
            if jid == job_id or jid.startswith((job_id + "_", job_id + "+"))]
    return bool(mine) and all(state in FINAL_STATES for state in mine)


def wait_until_done(job_ids: list[str], timeout: float = 600,
                    sacct: tuple[str, ...] = ("sacct",)) -> dict[str, str]:
    """Poll (every second) until every job is in a final state; returns the states.
    ``sacct``: the command that asks (another cluster's, run where it answers)."""
    current: dict[str, str] = {}

    def done() -> bool:
        current.clear()
        current.update(states(job_ids, sacct))
        return all(_done(j, current) for j in job_ids)

    wait_for(done, timeout, lambda: f"jobs not finished: {current}")
    return current


def wait_until_running(job_id: str, timeout: float = 300,
                       sacct: tuple[str, ...] = ("sacct",), every: float = 0.5) -> None:
    wait_for(lambda: states([job_id], sacct).get(job_id) == "RUNNING", timeout,
             f"job {job_id} running", every=every)


def wait_for_scrape_after(prometheus_url: str, when: float, timeout: float = 60) -> None:
    """Poll (every 0.5 s) until Prometheus has scraped every target at or after ``when``
    (epoch seconds): `timestamp(up)` of each target has passed it. Instead of a fixed
    sleep of "a scrape or two"."""
    import requests

    def scraped() -> bool:
        answer = requests.get(f"{prometheus_url}/api/v1/query", timeout=10,
                              params={"query": "timestamp(up)"}).json()
        times = [float(r["value"][1]) for r in answer.get("data", {}).get("result", [])]
        return bool(times) and min(times) >= when

    wait_for(scraped, timeout, f"{prometheus_url} scraping every target after {when}",
             every=0.5)


def jobreport(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed ``jobreport`` command with the stack's settings."""
    full_env = {**os.environ, **(env if env is not None else load_env())}
    return subprocess.run(
        [str(ROOT / ".venv" / "bin" / "jobreport"), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


@dataclass(frozen=True)
class Node:
    """One node of the stack's cluster (dev-stack's ``var/dev-stack/nodes``)."""

    name: str
    partition: str
    gpu_type: str  # "" on CPU nodes
    exporter_port: int


def nodes() -> tuple[Node, ...]:
    rows = (line.split() for line in (STACK_ROOT / "var" / "dev-stack" / "nodes").read_text()
            .splitlines() if line.strip())
    return tuple(Node(name, part, "" if gpu == "-" else gpu, int(port))
                 for name, part, gpu, port in rows)


def exporter_targets_yaml(indent: int = 6) -> str:
    """``static_configs`` entries scraping every node's jobs-exporter as the stack's own
    Prometheus does (``instance`` = the node), for a test's Prometheus of its own."""
    pad = " " * indent
    return "".join(f"{pad}- targets: ['127.0.0.1:{n.exporter_port}']\n"
                   f"{pad}  labels: {{instance: '{n.name}'}}\n" for n in nodes())


def restart_exporter(node: str, kill: str = "TERM") -> None:
    """Stop one node's jobs-exporter (``kill``: TERM as systemd stops it, KILL as a crash)
    and start it again as dev-stack did, with the same flags (its state file among them),
    once it serves /metrics."""
    import shlex
    import signal

    import requests

    state = STACK_ROOT / "var" / "dev-stack"
    pidfile = state / f"exporter-{node}.pid"
    pid = int(pidfile.read_text())
    os.kill(pid, getattr(signal, f"SIG{kill}"))
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or None, 30,
             lambda: f"jobs-exporter of {node} ({pid}) to exit")
    args = shlex.split((state / f"exporter-{node}.args").read_text())
    port = next(n.exporter_port for n in nodes() if n.name == node)
    with open(STACK_ROOT / "var" / f"exporter-{node}.log", "a") as log:
        proc = subprocess.Popen([str(STACK_ROOT / ".venv" / "bin" / "jobs-exporter"), *args],
                                stdout=log, stderr=log, start_new_session=True)
    pidfile.write_text(f"{proc.pid}\n")

    def serving() -> bool | None:
        try:
            return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).ok or None
        except requests.ConnectionError:
            return None

    wait_for(serving, 30, lambda: f"jobs-exporter of {node} serving again")


def node_of(job_id: str, timeout: float = 600) -> str:
    """The node a one-node job runs on, once it runs (polls squeue every 0.5 s)."""
    out: list[str] = []

    def node() -> str | None:
        out[:] = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %N"],
                                capture_output=True, text=True).stdout.split()
        return out[1] if len(out) == 2 and out[0] == "RUNNING" else None

    return wait_for(node, timeout, lambda: f"job {job_id} running: {out}", every=0.5)


def waited_for_cpu(report, thresholds) -> bool:
    """The job's threads waited for a core a fifth of its run or more (the CPU wait the
    exporter measures, ``pressure_high``): the stack's nodes share the machine's two
    cores with each other and with the tests, so a busy job may be starved, and
    ``cpu_starved`` is then the right verdict, never an idle one."""
    wait, elapsed = report.usage.cpu_wait_seconds, report.elapsed_seconds
    return bool(wait and elapsed and wait >= thresholds.pressure_high * elapsed)


def runnable_share(cpu_seconds: float, wait_seconds: float | None, elapsed: float,
                   cpus: int) -> float:
    """Share of an allocation's core-seconds the job's threads were runnable: on a core
    (TotalCPU) or waiting for one (CPU wait, summed over threads). The stack's nodes share
    two physical cores, so a busy job's CPU efficiency depends on its neighbours; this
    share does not, and it is what the detectors judge idle cores by."""
    return (cpu_seconds + (wait_seconds or 0.0)) / (elapsed * cpus)
