"""`--cluster NAME`: one of the clusters this jobreport serves (JOBREPORT_CLUSTER and
JOBREPORT_CLUSTERS), for the commands that read one cluster's jobs."""

from __future__ import annotations

import argparse
import sys

from webapp.settings import Settings


def add_cluster_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--cluster", default=None,
                        help=f"{what} (job ids repeat across clusters); default JOBREPORT_CLUSTER")


def settings_for(settings: Settings, cluster: str | None) -> Settings | None:
    """The settings aimed at ``cluster`` (its own sources), or None after saying on
    stderr that this jobreport does not serve it."""
    if not cluster:
        return settings
    try:
        return settings.for_cluster(cluster)
    except KeyError:
        served = ", ".join(settings.cluster_names)
        sys.stderr.write(f"jobreport: unknown cluster {cluster!r} (served: {served}; "
                         "others are added with JOBREPORT_CLUSTERS)\n")
        return None
