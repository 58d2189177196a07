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

from webapp.model import SourceUnavailable, TimeLimitKind
from webapp.sources.sacct_values import parse_sacct_duration

Runner = Callable[[list[str]], str]
PARTITION_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")  # never pass anything else to scontrol
_MAX_TIME_RE = re.compile(r"(?:^|\s)MaxTime=(\S+)")


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


def run_scontrol(argv: list[str], timeout: float) -> str:
    """Run scontrol (no shell); SourceUnavailable when it is missing, slow or failing."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable("partitions", "partition limits unavailable", str(exc)) from None
    if proc.returncode != 0:
        why = (proc.stderr or "").strip().splitlines()
        raise SourceUnavailable("partitions", "partition limits unavailable",
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
        self._cache: dict[str, tuple[float, tuple[TimeLimitKind, float | None]]] = {}
        self._lock = threading.Lock()

    def max_time(self, partition: str) -> tuple[TimeLimitKind, float | None]:
        """(PARTITION, seconds) or (UNLIMITED, None). Raises SourceUnavailable."""
        if not PARTITION_RE.match(partition):
            raise SourceUnavailable(self.name, "partition limits unavailable",
                                    f"not a partition name: {partition!r}")
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(partition)
        if hit and hit[0] > now:
            return hit[1]
        out = self._runner([self.scontrol_path, "show", "partition", partition, "--oneliner"])
        try:
            value = parse_max_time(out)
        except ValueError as exc:
            raise SourceUnavailable(self.name, "partition limits unavailable", str(exc)) from None
        with self._lock:
            self._cache[partition] = (now + self.ttl, value)
        return value
