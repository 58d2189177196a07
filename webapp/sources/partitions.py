"""The partitions' time limits, from ``scontrol show partition``: what ``Partition_Limit`` means.

sacct prints ``Partition_Limit`` when a job asked for no time limit of its own; the limit
that applies is the partition's ``MaxTime`` (usually finite). Partitions change rarely,
so each answer is kept for ``ttl`` seconds.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable

from jobreport_net.units import MIB, SLURM_SUFFIXES
from webapp.model import SourceUnavailable, TimeLimitKind
from webapp.sources.sacct_values import parse_sacct_duration

Runner = Callable[[list[str]], str]
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


def run_scontrol(argv: list[str], timeout: float, source: str = "partitions",
                 reason: str = "partition limits unavailable") -> str:
    """Run scontrol (no shell); SourceUnavailable(source, reason) when it is missing, slow
    or failing."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable(source, reason, str(exc)) from None
    if proc.returncode != 0:
        why = (proc.stderr or "").strip().splitlines()
        raise SourceUnavailable(source, reason,
                                why[-1] if why else f"exit status {proc.returncode}")
    return proc.stdout


class PartitionSource:
    """Each partition's MaxTime, cached for ``ttl`` seconds (failures are not cached)."""

    name = "partitions"

    def __init__(self, scontrol_path: str = "scontrol", runner: Runner | None = None,
                 timeout: float = 10.0, ttl: float = 300.0) -> None:
        self.scontrol_path = scontrol_path
        self.ttl = ttl
        self._runner = runner or (lambda argv: run_scontrol(argv, timeout))
        self._cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def _show(self, partition: str) -> str:
        """``scontrol show partition NAME --oneliner``, cached for ``ttl`` seconds."""
        if not PARTITION_RE.match(partition):
            raise SourceUnavailable(self.name, "partition limits unavailable",
                                    f"not a partition name: {partition!r}")
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(partition)
        if hit and hit[0] > now:
            return hit[1]
        out = self._runner([self.scontrol_path, "show", "partition", partition, "--oneliner"])
        with self._lock:
            self._cache[partition] = (now + self.ttl, out)
        return out

    def max_time(self, partition: str) -> tuple[TimeLimitKind, float | None]:
        """(PARTITION, seconds) or (UNLIMITED, None). Raises SourceUnavailable."""
        out = self._show(partition)
        try:
            return parse_max_time(out)
        except ValueError as exc:
            with self._lock:
                self._cache.pop(partition, None)  # failures are not cached
            raise SourceUnavailable(self.name, "partition limits unavailable", str(exc)) from None

    def billing_weights(self, partition: str) -> dict[str, float]:
        """The partition's TRESBillingWeights ({} when none). Raises SourceUnavailable."""
        try:
            return parse_billing_weights(self._show(partition))
        except ValueError as exc:
            raise SourceUnavailable(self.name, "billing weights unavailable", str(exc)) from None
