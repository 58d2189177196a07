"""The labelled job set: real stack jobs (``stack.STACK_JOBS`` names), each with the
findings it must have and the findings it must not have.

One table; a new detector adds its job here (and to STACK_JOBS) with the finding in
``must``, and its name to the ``must_not`` of the jobs that are its true negatives.
``tests/stack/test_labelled_jobs.py`` checks every row on the real stack.
"""

from __future__ import annotations

from dataclasses import dataclass

# No job of the set waits on purpose: a waiting verdict is wrong unless the job measurably
# waited for a core (its neighbours on the stack's shared cores: the test lets
# `cpu_starved` pass then); the causes are checked on captured cgroup v2 files
# (tests/test_detectors_causes.py) and on a loaded node (tests/stack/test_cpu_wait_verdicts.py).
WAITING = frozenset({"cpu_starved", "io_starved", "memory_thrashing"})
# The stack's replayed GPUs are 16 GiB Tesla T4s at 0 %: never busy, never "large".
GPU_NEVER = frozenset({"gpu_cores_idle", "gpu_memory_low", "gpu_util_low"})
EVERYTHING = frozenset({"*"})  # the tidy job: no finding at all


@dataclass(frozen=True)
class LabelledJob:
    job: str  # a STACK_JOBS name
    must: frozenset[str]
    must_not: frozenset[str]
    why: str


def row(job: str, must: set[str], must_not: set[str] | frozenset[str], why: str) -> LabelledJob:
    return LabelledJob(job, frozenset(must), frozenset(must_not) | WAITING, why)


LABELLED: tuple[LabelledJob, ...] = (
    LabelledJob("busy", frozenset(), EVERYTHING, "a 1-core busy loop: tidy"),
    row("idle", {"cpu_efficiency_low"},
        {"serial_on_many_cores", "memory_growth", "gpu_input_bound", "short_job"},
        "sleep 30 on one core: idle, cause unknown on v1"),
    row("two-cpus-one-used", {"serial_on_many_cores"},
        {"cpu_efficiency_low", "gpu_input_bound", "oversubscribed"},
        "one busy loop on 2 cores: serial, said once"),
    row("mem-over-request", {"memory_over_requested", "cpu_efficiency_low"},
        {"memory_growth", "memory_near_limit", "memory_in_tmpfs"},
        "300 MiB held flat of 4G: over-requested, no leak"),
    row("oom", {"out_of_memory"}, {"memory_near_limit", "memory_over_requested"},
        "400 MiB at once under 100M: killed"),
    row("gpu-untouched", {"gpu_idle", "cpu_efficiency_low"},
        {"gpu_input_bound", "serial_on_many_cores"} | GPU_NEVER,
        "a GPU and a sleep: idle GPU, no saturated core"),
    row("short", {"short_job"}, {"cpu_efficiency_low", "memory_growth"}, "sleep 1"),
    row("hostile-markup", {"cpu_efficiency_low"}, {"memory_growth", "short_job"},
        "sleep 12 with markup in its name"),
    row("hostile-header", {"cpu_efficiency_low"}, {"memory_growth", "short_job"},
        "sleep 12 with a mail header in its name"),
    row("multi-task", {"memory_over_requested", "cpu_efficiency_low"},
        {"memory_growth", "serial_on_many_cores", "oversubscribed"},
        "srun -n2, 200 MiB per task, flat"),
    row("small-files", {"small_io", "io_not_on_scratch", "cpu_efficiency_low"},
        {"many_open_files", "memory_growth"}, "3000 small files written in the home"),
    row("mem-growth", {"memory_growth"},
        {"out_of_memory", "memory_near_limit", "memory_over_requested", "memory_in_tmpfs"},
        "RSS climbing ~8 MB/s toward 500M: a leak's shape"),
    row("two-node-busy", set(),
        {"serial_on_many_cores", "node_idle", "cpu_efficiency_low", "oversubscribed"},
        "-N2 -n2, one busy loop per node: parallel, not serial"),
    row("two-node-one-idle", {"node_idle"}, {"oversubscribed", "memory_growth"},
        "-N2 -n2, the second rank asleep: its node did nothing"),
    row("shm", {"memory_in_tmpfs"},
        {"memory_near_limit", "memory_over_requested", "memory_growth", "out_of_memory"},
        "a GiB in /dev/shm under 1500M: memory MaxRSS does not show, not near the limit"),
    row("page-cache", set(),
        {"memory_near_limit", "memory_in_tmpfs", "memory_growth", "out_of_memory"},
        "440 MiB of page cache under 500M: reclaimable, no risk"),
    row("gpu-input-bound", {"gpu_input_bound"},
        {"gpu_idle", "serial_on_many_cores", "cpu_efficiency_low"} | GPU_NEVER,
        "one saturated core beside a GPU holding memory"),
)
