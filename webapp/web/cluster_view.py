"""Who sees what on the cluster page: the site's Slurm ``PrivateData`` decides.

With ``jobs``, ``usage``, ``accounts`` or ``users`` in it, squeue, sshare and sreport hide
other users' jobs and usage from everybody but Slurm's operators; the page must not show
more than Slurm does. Then a user who is not staff sees their own holdings and fair
share and the cluster's totals, not the other users' or the accounts' rows; staff see
everything, as everybody does where PrivateData hides none of these. When PrivateData
cannot be read, the page hides as the strict setting would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from webapp.sources.cluster_overview import ClusterOverview

HIDING = frozenset({"jobs", "usage", "accounts", "users"})  # slurm.conf(5), PrivateData
TOP = 10  # users and accounts listed in "who holds what"


@dataclass(frozen=True)
class ClusterView:
    """The overview as this user may see it, and what the page says about it."""

    overview: ClusterOverview
    cpus_held: float  # by every running job, whoever's
    gpus_held: float
    hidden_by: str = ""  # "PrivateData=jobs,usage" (or why unknown) when others' rows are hidden


def hides_others(private_data: frozenset[str] | None) -> bool:
    """True when PrivateData hides other users' jobs or usage (None: unknown, so yes)."""
    return private_data is None or bool(private_data & HIDING)


def cluster_view(overview: ClusterOverview, user: str, staff: bool,
                 private_data: frozenset[str] | None) -> ClusterView:
    """``overview`` cut to the top holders, or, for a user who is not staff where
    PrivateData hides others, to that user's own rows."""
    cpus = sum(row[1] for row in overview.users)
    gpus = sum(row[2] for row in overview.users)
    if staff or not hides_others(private_data):
        return ClusterView(replace(overview, users=overview.users[:TOP],
                                   accounts=overview.accounts[:TOP]), cpus, gpus)
    why = ("PrivateData=" + ",".join(sorted(private_data)) if private_data is not None
           else "PrivateData could not be read")
    own = replace(overview,
                  users=tuple(row for row in overview.users if row[0] == user),
                  accounts=(),
                  fairshare=tuple(row for row in overview.fairshare if row[1] == user),
                  usage=())
    return ClusterView(own, cpus, gpus, hidden_by=why)
