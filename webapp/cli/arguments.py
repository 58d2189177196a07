"""What the options of several commands share: `--cluster NAME` (one of the clusters this
jobreport serves), durations (`--max-span 7d`, `--since 2w`) and user names."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import timedelta

from webapp.mail.policy import USER_RE
from webapp.settings import Settings

_LOOKBACK_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*\Z")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def add_cluster_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """`--cluster NAME`, for the commands that read one cluster's jobs (JOBREPORT_CLUSTER
    and JOBREPORT_CLUSTERS name those served)."""
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


def parse_lookback(text: str) -> timedelta:
    """'90' or '90s', '30m', '1h', '2d', '1w'."""
    m = _LOOKBACK_RE.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30m, 1h, 2d)")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def lookback_seconds(text: str) -> float:
    """An argparse type: `--since 30d` as seconds."""
    try:
        return parse_lookback(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def user_name(text: str) -> str:
    """A user name as an option's value (`--user`, `opt-out USER`)."""
    if not USER_RE.match(text):
        raise argparse.ArgumentTypeError(f"not a user name: {text!r}")
    return text
