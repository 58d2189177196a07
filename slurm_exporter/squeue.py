"""Parse ``squeue -a -h -r -t all -O 'JobArrayID:|,JobID:|,State:|,...,Reason:|'``: one
line per job, array tasks expanded (``-r``), pending ones included.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

from jobreport_common.slurm_values import gpus_from_tres, tres_memory_bytes
from jobreport_common.slurm_values import parse_tres as parse_tres_text
from slurm_exporter.commands import SQUEUE_FIELDS
from slurm_exporter.fields import split_line

PENDING = "PENDING"


class JobLine(NamedTuple):  # a job without its id: the queue is counted by these
    state: str
    user: str
    account: str
    partition: str
    cpus: int
    gpus: int
    memory_bytes: int
    gpu_type: str  # from tres-per-node ("" when untyped or no GPU)
    reason: str  # folded (one reason per job)


# Pending jobs named one by one (jobid, partition, reason), so a job's report can say why
# it waited; past this many, only the counts per reason remain.
PENDING_JOBS_MAX = 20000


class Queue(Counter[JobLine]):
    """Counts of identical jobs, plus the first PENDING_JOBS_MAX pending jobs by id."""

    def __init__(self, *args: Any, **kwargs: int) -> None:
        super().__init__(*args, **kwargs)
        self.pending_jobs: list[tuple[str, str, str]] = []


def parse_squeue(text: str) -> Queue:
    """The queue as counts of identical jobs, from every line of the C2 output, e.g.

    ``8|8|PENDING|bob|teaching|debug|1|1|cpu=1,mem=200M,node=1,billing=1,gres/gpu=2|gres:gpu:2|Resources|``
    ``10_1|10|PENDING|alice|research|debug|1|1|cpu=1,mem=100M,node=1,billing=1|N/A|Priority|``

    Jobs differing only in their id (array tasks, a user's batch of alike jobs) are
    parsed once: 200,000 jobs hold a few thousand distinct lines.
    """
    lines: Counter[str] = Counter()
    pending: list[tuple[str, str]] = []  # (job id, the rest of its line)
    for line in text.splitlines():
        if line:
            rest = _after_ids(line)
            lines[rest] += 1
            if "|PENDING|" in line and len(pending) < PENDING_JOBS_MAX:
                pending.append((line.split("|", 1)[0], rest))
    queue = Queue()
    parsed: dict[str, JobLine] = {}
    for rest, count in lines.items():
        parsed[rest] = job = _job(rest)
        queue[job] += count  # two lines may fold into one job (a reason's node list)
    queue.pending_jobs = [(job_id, parsed[rest].partition, parsed[rest].reason)
                          for job_id, rest in pending if parsed[rest].state == PENDING]
    return queue


def parse_squeue_jobs(text: str) -> list[tuple[str, JobLine]]:
    """(JobArrayID, job) per line: ``10_2`` for an array task, else the job id."""
    parsed: dict[str, JobLine] = {}
    jobs = []
    for line in text.splitlines():
        if line:
            rest = _after_ids(line)
            if rest not in parsed:
                parsed[rest] = _job(rest)
            jobs.append((line.split("|", 1)[0], parsed[rest]))
    return jobs


def _after_ids(line: str) -> str:
    parts = line.split("|", 2)
    if len(parts) != 3:
        raise ValueError(f"expected {len(SQUEUE_FIELDS)} '|'-separated fields in {line!r}")
    return parts[2]


def _job(rest: str) -> JobLine:
    # The reason is free text and last: split_line keeps a `|` inside it.
    state, user, account, partition, cpus, _nodes, tres, per_node, reason = split_line(
        rest, len(SQUEUE_FIELDS) - 2)
    gpus, memory = parse_tres(tres)
    return JobLine(state, user, account, partition, int(cpus), gpus, memory,
                   gpu_type(per_node), fold_reason(reason))


def parse_tres(text: str) -> tuple[int, int]:
    """(GPUs, memory bytes) of ``cpu=1,mem=62.50G,node=1,billing=1,gres/gpu=2``: the web
    app's reading of sacct's AllocTRES (jobreport_common.slurm_values), so a job's GPUs and
    memory are the same figures in both. A bare memory number is MiB, Slurm's unit."""
    if text in ("", "N/A", "(null)"):
        return 0, 0
    tres = parse_tres_text(text)
    mem = tres.get("mem", "")
    return gpus_from_tres(tres), tres_memory_bytes(mem) if mem else 0


def gpu_type(tres_per_node: str) -> str:
    """``gres:gpu:a100:2`` or ``gres/gpu:a100=2`` -> ``a100``; untyped or none -> ``""``."""
    for item in tres_per_node.split(","):
        parts = item.replace("=", ":").replace("gres/", "gres:").split(":")
        if len(parts) >= 4 and parts[0] == "gres" and parts[1] == "gpu":
            return parts[2]
    return ""


def fold_reason(reason: str) -> str:
    """One reason per job: ``ReqNodeNotAvail, UnavailableNodes:cs[100-102]`` -> ``ReqNodeNotAvail``.

    The node list changes with every drained node; kept, it would split one reason into
    many series. Other reasons are Slurm's fixed words (``Resources``, ``JobHeldUser``) or
    fixed sentences, kept as they are.
    """
    reason = reason.strip()
    if reason.startswith("(") and reason.endswith(")"):  # %R style
        reason = reason[1:-1]
    if reason.startswith("ReqNodeNotAvail"):
        return "ReqNodeNotAvail"
    return reason
