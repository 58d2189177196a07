"""GPUs per type and per node state (sinfo Gres/GresUsed).

``idle`` is total minus allocated on every node, never reclassified: an idle GPU on a
drained node is counted under that node's state and flags. ``available`` counts only
idle GPUs on nodes that can take a job now.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from prometheus_client.core import Metric

from slurm_exporter.collectors.nodes import unique_nodes
from slurm_exporter.families import gauge
from slurm_exporter.sinfo import NodeLine
from slurm_exporter.states import join_flags

SCHEDULABLE_STATES = ("idle", "mixed")
# Flags that keep new jobs off a node (or off its idle GPUs) even when its base is idle.
UNAVAILABLE_FLAGS = frozenset({
    "drain", "fail", "maintenance", "reserved", "planned", "not_responding",
    "power_down", "powered_down", "powering_down", "powering_up", "reboot_requested",
    "reboot_issued", "invalid_reg", "future",
})


def available(line: NodeLine) -> bool:
    return line.state in SCHEDULABLE_STATES and not UNAVAILABLE_FLAGS.intersection(line.flags)


class GpusCollector:
    name = "gpus"
    source = "sinfo"

    def collect(self, cluster: str, lines: list[NodeLine]) -> Iterator[Metric]:
        node_total = gauge("slurm_node_gpus", "GPUs configured on the node.",
                           ["node", "gpu_type"])
        node_alloc = gauge("slurm_node_gpus_alloc", "GPUs of the node allocated to jobs.",
                           ["node", "gpu_type"])
        by_state: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        for n in unique_nodes(lines):
            for gpu_type, total in n.gpus.items():
                alloc = n.gpus_alloc.get(gpu_type, 0)
                node_total.add_metric([cluster, n.node, gpu_type], total)
                node_alloc.add_metric([cluster, n.node, gpu_type], alloc)
                sums = by_state[(gpu_type, n.state, join_flags(n.flags))]
                sums[0] += total
                sums[1] += alloc
        yield node_total
        yield node_alloc
        yield from self._states(cluster, by_state)
        yield from self._available(cluster, lines)

    def _states(self, cluster: str, by_state: dict[tuple[str, str, str], list[int]]
                ) -> Iterator[Metric]:
        labels = ["gpu_type", "state", "flags"]
        total = gauge("slurm_gpus", "GPUs on nodes in this state, per type.", labels)
        alloc = gauge("slurm_gpus_alloc", "Allocated GPUs on nodes in this state, per type.",
                      labels)
        idle = gauge("slurm_gpus_idle", "Unallocated GPUs on nodes in this state, per type "
                     "(on a drained or down node they are not available).", labels)
        for key, (t, a) in sorted(by_state.items()):
            total.add_metric([cluster, *key], t)
            alloc.add_metric([cluster, *key], a)
            idle.add_metric([cluster, *key], t - a)
        yield from (total, alloc, idle)

    def _available(self, cluster: str, lines: list[NodeLine]) -> Iterator[Metric]:
        cluster_wide: dict[str, int] = defaultdict(int)
        per_partition: dict[tuple[str, str], int] = defaultdict(int)
        seen: set[str] = set()
        for n in lines:
            for gpu_type, total in n.gpus.items():
                free = total - n.gpus_alloc.get(gpu_type, 0) if available(n) else 0
                per_partition[(n.partition, gpu_type)] += free
                if n.node not in seen:
                    cluster_wide[gpu_type] += free
            seen.add(n.node)
        family = gauge("slurm_gpus_available", "Idle GPUs on nodes that can start a job now "
                       "(idle or mixed, not drained, down, reserved or powered down).",
                       ["gpu_type"])
        for gpu_type, value in sorted(cluster_wide.items()):
            family.add_metric([cluster, gpu_type], value)
        yield family
        part = gauge("slurm_partition_gpus_available", "Idle GPUs on the partition's nodes "
                     "that can start a job now.", ["partition", "gpu_type"])
        for (partition, gpu_type), value in sorted(per_partition.items()):
            part.add_metric([cluster, partition, gpu_type], value)
        yield part
