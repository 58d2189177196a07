"""Pure parsers of cgroup files (v1 and v2 alike): text in, values out, no I/O."""

from __future__ import annotations

_NS = 1e-9
_US = 1e-6


def parse_flat_keyed(text: str) -> dict[str, int]:
    """Parse ``key value`` lines (memory.stat, cpu.stat, memory.events, cpuacct.stat).

    ``total_rss 311296``
    ``usage_usec 126686``
    """
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value:
            out[key] = int(value)
    return out


def parse_cpu_list(text: str) -> frozenset[int]:
    """Parse a cpuset list.

    ``0-3,8,10-11``
    ``0``
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cpus)


def parse_percpu(text: str) -> dict[int, float]:
    """Parse cpuacct.usage_percpu (ns per possible CPU) into seconds per core.

    ``824004970909 822349906515 839802105223 ``
    """
    return {core: int(ns) * _NS for core, ns in enumerate(text.split())}


def parse_pressure_total(text: str) -> float:
    """Seconds some task waited, from a PSI file's ``some`` line.

    ``some avg10=0.26 avg60=1.01 avg300=1.54 total=8646200``
    ``full avg10=0.00 avg60=0.00 avg300=0.00 total=0``
    """
    for line in text.splitlines():
        if line.startswith("some "):
            for field in line.split()[1:]:
                key, _, value = field.partition("=")
                if key == "total":
                    return int(value) * _US
    raise ValueError("no 'some ... total=' line in pressure file")


def parse_pids(text: str) -> list[int]:
    """Parse cgroup.procs / tasks: one id per line."""
    return [int(line) for line in text.split()]
