"""Parse ``sdiag`` (plain text on 22.05: ``--json`` is rejected) into named numbers.

Sections are introduced by header lines (``Main schedule statistics (microseconds):``);
values are ``key: number`` lines, per-RPC lines ``NAME ( id) count:N ave_time:N total_time:N``.
One code path reads 22.05, 24.11 and 26.05: the later two add ``RPC queue enabled`` and
two sections of exit reasons, ``Main scheduler exit:`` after the main statistics and
``Backfill exit`` after the backfill ones (without their own headers their lines would
count as main and backfill figures); there ``End of job queue:57`` has no space after the
colon once the count has two digits (fixtures/slurm/v24-*, v26-*).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RPC_LINE = re.compile(
    r"^\s*(?P<name>\S+)\s+\(\s*(?P<id>\d+)\)\s+count:(?P<count>\d+)\s+"
    r"ave_time:(?P<ave>\d+)\s+total_time:(?P<total>\d+)"
)
VALUE_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][^:]*?)\s*:\s*(?P<value>-?\d+(?:\.\d+)?)\s*$")
SECTIONS = (
    ("Main scheduler exit", "main_exit"),  # not in 22.05: why each cycle stopped
    ("Main schedule statistics", "main"),
    ("Backfilling stats", "backfill"),
    ("Backfill exit", "backfill_exit"),  # not in 22.05
    ("Remote Procedure Call statistics by message type", "rpc_type"),
    ("Remote Procedure Call statistics by user", "rpc_user"),
    ("Pending RPC statistics", "rpc_pending"),
)


@dataclass(frozen=True)
class Rpc:
    name: str
    count: int
    total_time_seconds: float


@dataclass
class SdiagStats:
    values: dict[tuple[str, str], float] = field(default_factory=dict)  # (section, key)
    rpc_by_type: list[Rpc] = field(default_factory=list)
    rpc_by_user: list[Rpc] = field(default_factory=list)


def parse_sdiag(text: str) -> SdiagStats:
    """E.g.

    ``Main schedule statistics (microseconds):``
    ``\\tLast cycle:   14``
    """
    stats = SdiagStats()
    section = "general"
    for line in text.splitlines():
        if not line.strip() or line.startswith("*"):
            continue
        header = next((key for title, key in SECTIONS if line.startswith(title)), None)
        if header:
            section = header
            continue
        if section in ("rpc_type", "rpc_user"):
            match = RPC_LINE.match(line)
            if match:
                rpc = Rpc(match["name"], int(match["count"]), int(match["total"]) / 1e6)
                (stats.rpc_by_type if section == "rpc_type" else stats.rpc_by_user).append(rpc)
                continue
        match = VALUE_LINE.match(line)
        if match:
            stats.values[(section, match["key"])] = float(match["value"])
    if not stats.values:
        raise ValueError("no sdiag statistics found")
    return stats
