"""The partitions' time limits, from ``scontrol show partition``: what ``Partition_Limit`` means.

sacct prints ``Partition_Limit`` when a job asked for no time limit of its own; the limit
that applies is the partition's ``MaxTime`` (usually finite). Partitions change rarely,
so each answer is kept for ``ttl`` seconds (webapp.sources.scontrol).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from jobreport_common.units import MIB, SLURM_SUFFIXES
from webapp.model import SourceUnavailable, TimeLimitKind
from webapp.sources.sacct_values import parse_sacct_duration
from webapp.sources.scontrol import Runner, ScontrolAnswers, run_scontrol

T = TypeVar("T")
PARTITION_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")  # never pass anything else to scontrol
_MAX_TIME_RE = re.compile(r"(?:^|\s)MaxTime=(\S+)")
_WEIGHTS_RE = re.compile(r"(?:^|\s)TRESBillingWeights=(\S+)")


def parse_max_time(text: str) -> tuple[TimeLimitKind, float | None]:
    """The partition's limit from ``scontrol show partition NAME --oneliner``.

        PartitionName=debug ... MaxTime=UNLIMITED MinNodes=0 ...
        PartitionName=gpu ... MaxTime=2-00:00:00 ...
    """
    m = _MAX_TIME_RE.search(text)
    if not m:
        raise ValueError("no MaxTime in scontrol's answer")
    value = m.group(1)
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return TimeLimitKind.UNLIMITED, None
    seconds = parse_sacct_duration(value)
    if seconds is None:
        raise ValueError(f"unreadable MaxTime {value!r}")
    return TimeLimitKind.PARTITION, seconds


def parse_billing_weights(text: str) -> dict[str, float]:
    """The partition's TRESBillingWeights, per TRES name in lower case; memory per MB.
    {} when the partition sets none (Slurm then bills the allocated CPUs).

        PartitionName=gpu ... TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=2.0
    """
    m = _WEIGHTS_RE.search(text)
    if not m:
        return {}
    out: dict[str, float] = {}
    for item in m.group(1).split(","):
        name, _, value = item.partition("=")
        name = name.strip().lower()
        if not name or not value:
            continue
        unit = value[-1].upper() if value[-1].isalpha() else ""
        number = float(value[:-1] if unit else value)
        if name == "mem":
            # Per MB unless suffixed (slurm.conf(5), TRESBillingWeights): 0.25G is per GiB.
            number *= MIB / SLURM_SUFFIXES.get(unit, MIB)
        out[name] = number
    return out


class PartitionSource:
    """Each partition's MaxTime and billing weights, from one ``scontrol show partition``
    kept for ``ttl`` seconds (failures are not kept: webapp.sources.scontrol)."""

    name = "partitions"

    def __init__(self, scontrol_path: str = "scontrol", runner: Runner | None = None,
                 timeout: float = 10.0, ttl: float = 300.0) -> None:
        self.scontrol_path = scontrol_path
        self.ttl = ttl
        self._answers = ScontrolAnswers(runner or (lambda argv: run_scontrol(argv, timeout)),
                                        ttl)

    def _read(self, partition: str, parse: Callable[[str], T], reason: str) -> T:
        """``parse`` of ``scontrol show partition NAME --oneliner``; SourceUnavailable
        (``reason``) when scontrol fails, the name is not one or the answer unreadable."""
        if not PARTITION_RE.match(partition):
            raise SourceUnavailable(self.name, "partition limits unavailable",
                                    f"not a partition name: {partition!r}")
        argv = [self.scontrol_path, "show", "partition", partition, "--oneliner"]
        try:
            return self._answers.read(argv, parse)
        except ValueError as exc:
            raise SourceUnavailable(self.name, reason, str(exc)) from None

    def max_time(self, partition: str) -> tuple[TimeLimitKind, float | None]:
        """(PARTITION, seconds) or (UNLIMITED, None). Raises SourceUnavailable."""
        return self._read(partition, parse_max_time, "partition limits unavailable")

    def billing_weights(self, partition: str) -> dict[str, float]:
        """The partition's TRESBillingWeights ({} when none). Raises SourceUnavailable."""
        return self._read(partition, parse_billing_weights, "billing weights unavailable")
