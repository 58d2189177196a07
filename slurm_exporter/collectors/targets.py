"""Allocation targets from the constants file (no Slurm command)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from jobreport_common.constants import ClusterConstants
from slurm_exporter.families import gauge

CLUSTER_METRICS = {
    "students": ("slurm_constant_students", "Students using the cluster (constants file)."),
    "gpus": ("slurm_constant_gpus", "GPUs the cluster is expected to offer over the year."),
    "cpus": ("slurm_constant_cpus", "CPUs the cluster is expected to offer over the year."),
}
ACCOUNT_METRICS = {
    "gpu_years": ("slurm_allocation_target_gpu_years",
                  "GPU-years allocated to the account for the year."),
    "cpu_years": ("slurm_allocation_target_cpu_years",
                  "CPU-years allocated to the account for the year."),
    "target_share": ("slurm_allocation_target_share",
                     "Share of the cluster the account should get (0..1)."),
}


class TargetsCollector:
    name = "targets"
    source = None  # from the constants file, not from Slurm

    def collect(self, cluster: str, constants: ClusterConstants) -> Iterator[Metric]:
        for key, (name, doc) in CLUSTER_METRICS.items():
            if key in constants.values:
                family = gauge(name, doc)
                family.add_metric([cluster], constants.values[key])
                yield family
        for key, (name, doc) in ACCOUNT_METRICS.items():
            family = gauge(name, doc, ["account"])
            for account, values in sorted(constants.accounts.items()):
                if key in values:
                    family.add_metric([cluster, account], values[key])
            yield family
