"""Per-job energy attribution over one scrape interval (pure: numbers in, joules out).

Over an interval the node measured ``package`` (RAPL package zones), ``dram`` (RAPL DRAM
zones), each GPU's joules, and, where it has one, a node ``meter`` (BMC or ACPI power
meter) that includes all of those. A job gets:

- ``cpu``: the package joules times its share of the node's busy CPU time;
- ``dram``: the DRAM joules times its share of the node's used memory;
- ``gpu``: the joules of the GPUs allocated to it;
- ``other``: what the meter measured beyond every job's cpu/dram/gpu (idle package,
  processes outside jobs, idle unallocated GPUs, fans, disks, power-supply loss), times
  its share of the node's cores (allocated cores / all cores).

What is left, ``other`` of the unallocated cores, is the node's unattributed joules, so
the jobs' joules plus it equal the meter. Without a meter the node's measured total is
package + dram + GPUs. A meter reading below the parts (an averaged BMC value lagging a
load step) leaves ``other`` at 0 rather than negative.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SOURCES = ("cpu", "dram", "gpu", "other")


@dataclass(frozen=True)
class JobInterval:
    job_id: str
    cpu_seconds: float  # CPU time the job used in the interval
    memory_bytes: float  # the job's memory in use (at the end of the interval)
    cores: int  # cores allocated to the job on this node
    gpus: tuple[int, ...] = ()  # GPU indexes allocated to the job


@dataclass(frozen=True)
class NodeInterval:
    package_joules: float
    dram_joules: float
    meter_joules: float | None  # None: no node meter
    gpu_joules: Mapping[int, float] = field(default_factory=dict)  # every GPU of the node
    busy_cpu_seconds: float = 0.0  # the node's non-idle CPU time in the interval
    used_memory_bytes: float = 0.0  # MemTotal - MemAvailable
    cores: int = 1  # online CPUs

    @property
    def total_joules(self) -> float:
        parts = self.package_joules + self.dram_joules + sum(self.gpu_joules.values())
        return parts if self.meter_joules is None else self.meter_joules


@dataclass(frozen=True)
class Attribution:
    jobs: dict[str, dict[str, float]]  # job id -> source -> joules
    unattributed_joules: float  # the unallocated cores' share of ``other``


def attribute(node: NodeInterval, jobs: Sequence[JobInterval]) -> Attribution:
    # Jobs' CPU time can exceed the node's busy time measured a few ms apart: never > 1.
    busy = max(node.busy_cpu_seconds, sum(j.cpu_seconds for j in jobs))
    used = max(node.used_memory_bytes, sum(j.memory_bytes for j in jobs))
    cores = max(node.cores, sum(j.cores for j in jobs))
    out: dict[str, dict[str, float]] = {}
    for job in jobs:
        out[job.job_id] = {
            "cpu": node.package_joules * job.cpu_seconds / busy if busy > 0 else 0.0,
            "dram": node.dram_joules * job.memory_bytes / used if used > 0 else 0.0,
            "gpu": sum(node.gpu_joules.get(i, 0.0) for i in job.gpus),
        }
    parts = sum(v for shares in out.values() for v in shares.values())
    other = max(node.total_joules - parts, 0.0)
    for job in jobs:
        out[job.job_id]["other"] = other * job.cores / cores if cores > 0 else 0.0
    unattributed = other * (cores - sum(j.cores for j in jobs)) / cores if cores > 0 else other
    return Attribution(out, unattributed)


def counter_delta(previous: int, current: int, max_range: int) -> int:
    """Increase of a counter that wraps to 0 after ``max_range`` (RAPL's max_energy_range_uj)."""
    if current >= previous:
        return current - previous
    return max_range - previous + current


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(non-idle ticks of all CPUs, number of CPUs) from /proc/stat::

        cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0
        cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0

    Non-idle = user + nice + system + irq + softirq + steal (guest is inside user).
    """
    busy, cpus = None, 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            busy = f[0] + f[1] + f[2] + sum(f[5:8])
        elif line.startswith("cpu"):
            cpus += 1
    if busy is None:
        raise ValueError("no aggregate cpu line")
    return busy, max(cpus, 1)


def parse_meminfo_used(text: str) -> int:
    """MemTotal - MemAvailable in bytes from /proc/meminfo::

        MemTotal:        2014512 kB
        MemAvailable:    1236260 kB
    """
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("MemTotal", "MemAvailable"):
            values[name] = int(rest.split()[0]) * 1024
    return values["MemTotal"] - values["MemAvailable"]
