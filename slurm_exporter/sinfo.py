"""Parse ``sinfo -a -h -N -O 'NodeList:|,PartitionName:|,StateComplete:|,...'``: one line
per node and partition (a node in three partitions prints three lines).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobreport_common.units import MIB
from slurm_exporter.commands import SINFO_FIELDS
from slurm_exporter.fields import integer, optional_float, split_line
from slurm_exporter.gres import parse_gpus
from slurm_exporter.states import held_state, split_state


@dataclass(frozen=True, slots=True)
class NodeLine:
    node: str
    partition: str
    state: str  # base state as slurmctld holds it
    flags: tuple[str, ...]
    cpus_alloc: int
    cpus_idle: int
    cpus_other: int
    cpus_total: int
    memory_bytes: int
    memory_alloc_bytes: int
    memory_free_bytes: int | None  # N/A until slurmd reports
    cpu_load: float | None
    gpus: dict[str, int]  # per type, configured
    gpus_alloc: dict[str, int]
    reason: str  # why drained/down; "" when none


def parse_sinfo(text: str) -> list[NodeLine]:
    """Every line of the C1 output, e.g.

    ``vm|debug|idle|0/2/0/2|21695|0|23332|0.36|gpu:2|gpu:0|none|``
    ``vm|debug|allocated+drain|1/0/1/2|21695|200|23251|0.32|gpu:2|gpu:1|maintenance|``
    """
    return [_line(line) for line in text.splitlines() if line.strip()]


def _line(line: str) -> NodeLine:
    node, partition, state, cpus, mem, alloc_mem, free_mem, load, gres, gres_used, reason = (
        split_line(line, len(SINFO_FIELDS))
    )
    counts = cpus.split("/")
    if len(counts) != 4:
        raise ValueError(f"CPUsState {cpus!r} is not A/I/O/T")
    alloc, idle, other, total = (integer(c, "CPU count") for c in counts)
    base, flags = split_state(state)
    free = optional_float(free_mem)
    return NodeLine(
        node=node,
        partition=partition,
        state=held_state(base, alloc, total),
        flags=flags,
        cpus_alloc=alloc,
        cpus_idle=idle,
        cpus_other=other,
        cpus_total=total,
        memory_bytes=integer(mem, "Memory") * MIB,
        memory_alloc_bytes=integer(alloc_mem, "AllocMem") * MIB,
        memory_free_bytes=None if free is None else int(free) * MIB,
        cpu_load=optional_float(load),
        gpus=parse_gpus(gres),
        gpus_alloc=parse_gpus(gres_used),
        reason="" if reason == "none" else reason,
    )
