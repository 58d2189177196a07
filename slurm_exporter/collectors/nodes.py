"""Node states (uncollapsed), CPUs, memory and load per node and per partition (sinfo)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from prometheus_client.core import Metric

from slurm_exporter.families import add, gauge
from slurm_exporter.sinfo import NodeLine
from slurm_exporter.states import join_flags

# sinfo CPUsState's four counts and their metric suffixes: the total is the bare name
# (promtool: a gauge must not end in _total, the counters' suffix).
CPU_KINDS = (("alloc", "_alloc"), ("idle", "_idle"), ("other", "_other"), ("total", ""))


def unique_nodes(lines: list[NodeLine]) -> list[NodeLine]:
    """One line per node (sinfo prints a node once per partition)."""
    return list({line.node: line for line in lines}.values())


class NodesCollector:
    name = "nodes"
    source = "sinfo"

    def collect(self, cluster: str, lines: list[NodeLine]) -> Iterator[Metric]:
        nodes = unique_nodes(lines)
        info = gauge(
            "slurm_node_state_info",
            "A node's state as Slurm holds it: base state and flags (+-joined, sorted); "
            "always 1.",
            ["node", "state", "flags", "reason"],
        )
        member = gauge(
            "slurm_node_partition_info", "The node belongs to the partition; always 1.",
            ["node", "partition"],
        )
        cpus = {k: gauge(f"slurm_node_cpus{suffix}", f"CPUs of the node ({k}).", ["node"])
                for k, suffix in CPU_KINDS}
        mem_total = gauge("slurm_node_memory_total_bytes", "Configured memory of the node, "
                          "in bytes.", ["node"])
        mem_alloc = gauge("slurm_node_memory_alloc_bytes", "Memory allocated to jobs on the "
                          "node, in bytes.", ["node"])
        mem_free = gauge("slurm_node_memory_free_bytes", "Free memory the node's slurmd "
                         "reported, in bytes (absent until it reports).", ["node"])
        load = gauge("slurm_node_cpu_load", "CPU load average the node's slurmd reported.",
                     ["node"])
        for n in nodes:
            labels = {"cluster": cluster, "node": n.node}
            add(info, {**labels, "state": n.state, "flags": join_flags(n.flags),
                       "reason": n.reason}, 1)
            for (kind, _), value in zip(CPU_KINDS, (n.cpus_alloc, n.cpus_idle, n.cpus_other,
                                               n.cpus_total), strict=True):
                add(cpus[kind], labels, value)
            add(mem_total, labels, n.memory_bytes)
            add(mem_alloc, labels, n.memory_alloc_bytes)
            if n.memory_free_bytes is not None:
                add(mem_free, labels, n.memory_free_bytes)
            if n.cpu_load is not None:
                add(load, labels, n.cpu_load)
        for line in lines:
            member.add_metric([cluster, line.node, line.partition], 1)
        yield info
        yield member
        yield from cpus.values()
        yield from (mem_total, mem_alloc, mem_free, load)
        yield from self._partitions(cluster, lines)

    def _partitions(self, cluster: str, lines: list[NodeLine]) -> Iterator[Metric]:
        counts: Counter[tuple[str, str, str]] = Counter()
        sums: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
        for n in lines:
            counts[(n.partition, n.state, join_flags(n.flags))] += 1
            s = sums[n.partition]
            for i, v in enumerate((n.cpus_alloc, n.cpus_idle, n.cpus_other, n.cpus_total,
                                   n.memory_bytes, n.memory_alloc_bytes)):
                s[i] += v
        nodes = gauge("slurm_nodes", "Nodes of the partition in this state and flags.",
                      ["partition", "state", "flags"])
        for (partition, state, flags), count in sorted(counts.items()):
            nodes.add_metric([cluster, partition, state, flags], count)
        yield nodes
        names = [f"slurm_partition_cpus{suffix}" for _, suffix in CPU_KINDS] + [
            "slurm_partition_memory_total_bytes", "slurm_partition_memory_alloc_bytes"]
        docs = [f"CPUs of the partition's nodes ({k}); idle excludes drained and down "
                "nodes (sinfo counts theirs as other)." for k, _ in CPU_KINDS] + [
            "Configured memory of the partition's nodes, in bytes.",
            "Memory allocated to jobs on the partition's nodes, in bytes."]
        for i, (name, doc) in enumerate(zip(names, docs, strict=True)):
            family = gauge(name, doc, ["partition"])
            for partition, s in sorted(sums.items()):
                family.add_metric([cluster, partition], s[i])
            yield family
