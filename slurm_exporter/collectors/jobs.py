"""The queue (squeue): jobs by state and partition, by user and by account with their
CPUs, GPUs and memory, and pending jobs by reason (each job counted once)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping

from prometheus_client.core import Metric

from slurm_exporter.families import gauge
from slurm_exporter.gres import UNTYPED
from slurm_exporter.squeue import PENDING, JobLine

# The unit ends the name (slurm_user_memory_alloc_bytes), as Prometheus's conventions ask.
RESOURCES = (("cpus_alloc", "CPUs"), ("gpus_alloc", "GPUs"),
             ("memory_alloc_bytes", "Memory in bytes"))


class JobsCollector:
    name = "jobs"
    source = "squeue"

    def collect(self, cluster: str, queue: Counter[JobLine]) -> Iterator[Metric]:
        by_partition: Counter[tuple[str, str]] = Counter()
        pending: Counter[tuple[str, str]] = Counter()
        pending_gpus: Counter[tuple[str, str]] = Counter()
        # kind -> (user or account, state) -> [jobs, CPUs, GPUs, memory]
        owners: dict[str, defaultdict[tuple[str, str], list[int]]] = {
            "user": defaultdict(lambda: [0, 0, 0, 0]),
            "account": defaultdict(lambda: [0, 0, 0, 0])}
        for (state, user, account, partition, cpus, gpus, memory, gpu_type, reason), n in \
                queue.items():
            by_partition[(state, partition)] += n
            if state == PENDING:
                pending[(reason, partition)] += n
                if gpus:
                    pending_gpus[(partition, gpu_type or UNTYPED)] += gpus * n
            for kind, who in (("user", user), ("account", account)):
                sums = owners[kind][(who, state)]
                sums[0] += n
                sums[1] += cpus * n
                sums[2] += gpus * n
                sums[3] += memory * n
        yield _family("slurm_jobs", "Jobs in this state in the partition.",
                      ["state", "partition"], by_partition, cluster)
        yield _family("slurm_pending_jobs", "Pending jobs of the partition waiting for this "
                      "reason (one reason per job).", ["reason", "partition"], pending, cluster)
        yield _family("slurm_pending_gpus", "GPUs requested by the partition's pending jobs, "
                      "per requested type.", ["partition", "gpu_type"], pending_gpus, cluster)
        for kind, per_owner in owners.items():
            yield from _owner_families(cluster, kind, per_owner)
        named = gauge("slurm_job_pending_info", "1 for a pending job, with the reason Slurm "
                      "gives for its wait (the first 20,000 pending jobs).",
                      ["jobid", "partition", "reason"])
        for job_id, partition, reason in getattr(queue, "pending_jobs", ()):
            named.add_metric([cluster, job_id, partition, reason], 1)
        yield named


def _family(name: str, doc: str, labels: list[str], counts: Counter[tuple[str, str]],
            cluster: str) -> Metric:
    family = gauge(name, doc, labels)
    for key, value in sorted(counts.items()):
        family.add_metric([cluster, *key], value)
    return family


def _owner_families(cluster: str, kind: str,
                    sums: Mapping[tuple[str, str], list[int]]) -> Iterator[Metric]:
    labels = [kind, "state"]
    jobs = gauge(f"slurm_{kind}_jobs", f"Jobs of the {kind} in this state.", labels)
    resources = [
        gauge(f"slurm_{kind}_{res}", f"{what} of the {kind}'s jobs in "
              "this state (requested, for pending jobs).", labels)
        for res, what in RESOURCES
    ]
    for (who, state), (count, *values) in sorted(sums.items()):
        jobs.add_metric([cluster, who, state], count)
        for family, value in zip(resources, values, strict=True):
            family.add_metric([cluster, who, state], value)
    yield jobs
    yield from resources
