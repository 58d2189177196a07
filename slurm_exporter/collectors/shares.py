"""Fair share per account and user (sshare); blank values (account rows' FairShare,
NormShares under priority/basic) are left out rather than reported as 0."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from slurm_exporter.families import gauge
from slurm_exporter.sshare import ShareLine

FIELDS = (
    ("fairshare", "slurm_fairshare", "FairShare factor of the association (0..1)."),
    ("level_fs", "slurm_fairshare_level", "LevelFS: shares over usage among siblings "
     "(+Inf with no usage)."),
    ("raw_shares", "slurm_share_raw_shares", "Shares assigned to the association."),
    ("norm_shares", "slurm_share_norm_shares", "Shares normalised to the cluster (0..1)."),
    ("raw_usage", "slurm_share_raw_usage", "Decayed usage of the association, in "
     "CPU-seconds weighted by TRES billing."),
    ("effective_usage", "slurm_share_effective_usage", "Usage normalised to the cluster, "
     "including the parent's (0..1)."),
)


class SharesCollector:
    name = "shares"
    source = "sshare"

    def collect(self, cluster: str, shares: list[ShareLine]) -> Iterator[Metric]:
        for attr, name, doc in FIELDS:
            family = gauge(name, doc, ["account", "user"])
            for s in shares:
                value = getattr(s, attr)
                if value is not None:
                    family.add_metric([cluster, s.account, s.user], value)
            yield family
